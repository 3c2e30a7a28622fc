INSERT INTO slots (id, slot, n) VALUES (1, floor(random() * 100), 1)
    ON CONFLICT (id, slot) DO UPDATE SET n = slots.n + excluded.n;
