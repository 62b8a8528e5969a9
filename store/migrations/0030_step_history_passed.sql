-- The path of each step (issue 27): the ids of the elements its tokens
-- completed or left and of the sequence flows they took, in order
-- (engine.Effects.Passed, at most engine.MaxPassed per step and its
-- buffered messages together); passed_cut says the step passed more. The
-- console marks them on the instance's diagram. Rows written before hold
-- NULL: no path recorded.
ALTER TABLE step_history ADD COLUMN passed text[],
    ADD COLUMN passed_cut boolean NOT NULL DEFAULT false;
