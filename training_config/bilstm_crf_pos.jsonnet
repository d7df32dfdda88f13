// The BiLSTM-CNN-CRF baseline (bilstm_crf.jsonnet) for POS tagging: the POS column as plain labels,
// an unconstrained CRF, accuracy as the validation metric.
// Data: the fixtures (default, the POS column), conll2000_pos or ewt_upos (training_config/data.libsonnet).
local data = import "data.libsonnet";
local base = (import "bilstm_crf.jsonnet").fixture_config;

// Its measured rows (docs/RESULTS.md) used the earlier recipe, kept here: Adam, batches of 32, 100
// LSTM units per direction (the NER recipe of bilstm_crf.jsonnet has not been measured on POS).
data.on(base + {
  on_real_data+:: { task: "POS" },
  dataset_reader+: { tag_column: 1, file_tag_scheme: null },
  model+: { encoder+: { hidden_size: 100 }, head+: { tag_scheme: null } },
  data_loader+: { batch_sampler+: { batch_size: 32 } },
  trainer+: {
    optimizer: { type: "adam", lr: 0.002 },
    learning_rate_scheduler:: null,
    num_epochs: 15,
    validation_metric: "+accuracy",
  },
})
