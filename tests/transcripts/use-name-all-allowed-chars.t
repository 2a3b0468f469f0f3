# Tube names may use letters, digits and - + / ; . $ _ ( ).
c1 > use Az09+/;.$_()-
c1 < USING Az09+/;.$_()-
