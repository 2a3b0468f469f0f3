"""``python -m beanpole``: the same as the ``beanpole`` command."""

from beanpole.cli import main

if __name__ == "__main__":
    main()
