"""``python -m beanpole``: the same as the ``beanpole`` command.

The front door: may import any layer; nothing in the package imports it.
"""

from beanpole.cli import main

if __name__ == "__main__":
    main()
