-- The SQL surface for maintainers. Column lists are a contract (DESIGN.md):
-- add columns only at the end, never rename. Booleans are 0/1; NULL = unknown.

DROP VIEW IF EXISTS v_arch_capability;
CREATE VIEW v_arch_capability AS
SELECT vllm_version, platform, arch, class_path, file, line,
       supports_pp, supports_lora, supports_multimodal, supports_encoder_tp_data,
       is_hybrid, has_inner_state, is_attention_free, supports_transcription,
       is_pooling_model, is_text_generation_model, supports_eagle3, is_moe
FROM arch_capability;

DROP VIEW IF EXISTS v_draft;
CREATE VIEW v_draft AS
SELECT vllm_version, platform, target_model_type, target_arch, method,
       draft_arch, draft_class, draft_supports_pp, draft_inherits_pp
FROM draft_mapping;

DROP VIEW IF EXISTS v_gate;
CREATE VIEW v_gate AS
SELECT vllm_version, rule_id, status, effect, message, file, line, reason
FROM gate_status;

DROP VIEW IF EXISTS v_flag;
CREATE VIEW v_flag AS
SELECT vllm_version, flag, kind, canonical, value_type, file, line
FROM cli_flag;

DROP VIEW IF EXISTS v_parser;
CREATE VIEW v_parser AS
SELECT vllm_version, kind, name, module, class_name, file, line
FROM parser_name;

-- How argparse reads an option's value (compat.vllm.cli_kwargs): action, nargs, the type
-- callable (int, float, json, dataclass = pydantic-validated JSON of json_class, ...), choices
-- as JSON (NULL = any value) and the file:line they are written at. flag is the long form
-- ('model_tag' for the positional).
DROP VIEW IF EXISTS v_flag_value;
CREATE VIEW v_flag_value AS
SELECT vllm_version, flag, option_strings, action, nargs, type, json_class, choices,
       choices_file, choices_line, "default", file, line
FROM cli_value;

-- Keys the JSON config flags accept (compat.vllm.config_schema): one row per field of each
-- config class reachable from a dataclass-typed flag (field '' is the class row, with extra =
-- forbid|ignore|allow: what pydantic does with an unknown key). type is a JSON type spec.
DROP VIEW IF EXISTS v_config_field;
CREATE VIEW v_config_field AS
SELECT vllm_version, class_name, field, type, "default", extra, file, line
FROM config_field;

DROP VIEW IF EXISTS v_verdict;
CREATE VIEW v_verdict AS
SELECT v.vllm_version, v.platform, v.hardware, v.recipe, v.model_id, v.variant, v.strategy,
       v.feature, v.mode, v.status, v.message, v.reason, v.evidence,
       v.cause_kind, v.cause, v.works_from, c.fix_kind, c.fix, v.source
FROM verdict v LEFT JOIN cause c ON c.id = v.cause_id;

-- One row per (recipe, cause): what fails, the fix, and the combinations it blocks
-- (ungated rows at the judged releases; a row failing for two causes counts under both).
DROP VIEW IF EXISTS v_cause;
CREATE VIEW v_cause AS
SELECT c.recipe, c.kind AS cause_kind, c.label AS cause, c.element, c.mode, c.field, c.line,
       c.finding, c.fix_kind, c.fix, c.fix_why,
       COUNT(v.id) AS rows,
       SUM(v.status = 'blocked') AS blocked,
       COUNT(DISTINCT v.strategy) AS strategies,
       COUNT(DISTINCT v.variant) AS variants,
       COUNT(DISTINCT v.hardware) AS hardware,
       GROUP_CONCAT(DISTINCT v.vllm_version) AS releases,
       c.works_from, c.clear_from
FROM cause c
JOIN verdict_cause vc ON vc.cause_id = c.id
JOIN verdict v ON v.id = vc.verdict_id AND v.judged = 1 AND v.gated = 0
GROUP BY c.id;

DROP VIEW IF EXISTS v_finding;
CREATE VIEW v_finding AS
SELECT vllm_version, platform, hardware, recipe, model_id, variant, strategy,
       feature, mode, status, message, reason, evidence, gated, pinned, works_from, judged,
       source
FROM verdict
WHERE status <> 'ok';
