// seq2biseq_pos.jsonnet on UD English-EWT r2.16 UPOS. See data.libsonnet.
(import "data.libsonnet").on(import "../seq2biseq_pos.jsonnet", "ewt_upos")
