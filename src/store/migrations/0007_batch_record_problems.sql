-- A failed batch record keeps the whole problem its synchronous route would have answered, so an integrator
-- can fix the record without replaying it: {detail, errors?, extensions?}. `problem_code` stays the key of
-- the catalogue (type and title are derived from it when read, as for any problem response).
-- Records that failed before this column existed keep only their code; they are read with the title as detail.
ALTER TABLE batch_records ADD COLUMN problem jsonb;
