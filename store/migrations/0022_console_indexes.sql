-- The web console's reads (0022). An instance list filtered by definition
-- walks its instances in id order (the cursor) and stops at the page's end;
-- the diagram's per-element counts walk the active instances of one version
-- only, a page at a time in id order. Neither column changes after an instance is created, and status only
-- when it ends, so neither index costs the steps' HOT updates.
CREATE INDEX instances_definition ON instances (definition_key, id);
CREATE INDEX instances_active_definition ON instances (definition_key, definition_version, id) WHERE status = 'active';
