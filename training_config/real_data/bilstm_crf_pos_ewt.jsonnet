// The BiLSTM-CNN-CRF POS baseline (bilstm_crf_pos.jsonnet) on UD English-EWT r2.16 UPOS. See data.libsonnet.
(import "data.libsonnet").on(import "../bilstm_crf_pos.jsonnet", "ewt_upos")
