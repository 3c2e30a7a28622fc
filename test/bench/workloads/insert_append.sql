INSERT INTO events (v) VALUES (1);
