// deptree_ner.jsonnet on wnut17 (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../deptree_ner.jsonnet").fixture_config, "wnut17")
