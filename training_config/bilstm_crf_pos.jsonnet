// The BiLSTM-CNN-CRF baseline (bilstm_crf.jsonnet) for POS tagging: the POS column as plain labels,
// an unconstrained CRF, accuracy as the validation metric. Data as in seq2biseq_pos.jsonnet; batches
// of sentences of similar length as there (the `bucket` batch sampler, see bilstm_crf.jsonnet).
local base = import "bilstm_crf.jsonnet";

base + {
  dataset_reader+: { tag_column: 1, file_tag_scheme: null },
  model+: { head+: { tag_scheme: null } },
  trainer+: { validation_metric: "+accuracy" },
}
