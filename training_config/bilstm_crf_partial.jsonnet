// The BiLSTM-CNN-CRF baseline (bilstm_crf.jsonnet) on partially annotated data (docs/partial.md):
// a token tagged `-` is open; the CRF's loss sums over the tag paths the marked tokens allow, and the
// expected share of entity tokens (Effland & Collins, 2021) keeps the open text from filling with entities.
// Data: the fixtures (default; training on fixtures/partial/train.txt, BIO), conll2003, uner_ewt,
// wnut17 (training_config/data.libsonnet).
local data = import "data.libsonnet";
local base = (import "bilstm_crf.jsonnet").fixture_config;

data.on(base + {
  dataset_reader+: { file_tag_scheme: "BIO" },
  train_data_path: "fixtures/partial/train.txt",
  model+: { head+: { open_tokens: { entity_ratio: 0.15 } } },
})
