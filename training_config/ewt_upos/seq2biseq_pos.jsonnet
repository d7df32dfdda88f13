// seq2biseq_pos.jsonnet on ewt_upos (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../seq2biseq_pos.jsonnet").fixture_config, "ewt_upos")
