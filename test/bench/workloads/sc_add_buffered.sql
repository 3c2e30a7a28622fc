-- A random element of a billion into one hot key's sketch: past its first thousands, most
-- elements raise no register (the sketch's common case), as a busy page's visitors do.
\set element random(1, 1000000000)
SELECT sc_add('distinct_hot', 0, :element);
