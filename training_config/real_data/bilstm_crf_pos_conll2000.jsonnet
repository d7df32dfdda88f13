// The BiLSTM-CNN-CRF POS baseline (bilstm_crf_pos.jsonnet) on the POS column of CoNLL-2000. See data.libsonnet.
(import "data.libsonnet").on(import "../bilstm_crf_pos.jsonnet", "conll2000_pos")
