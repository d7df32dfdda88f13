// deptree_ner_contextual.jsonnet on wnut17 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../deptree_ner_contextual.jsonnet").fixture_config, "wnut17")
