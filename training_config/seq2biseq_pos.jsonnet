// Seq2Biseq (seq2biseq.jsonnet) for POS tagging (§4, WSJ in the paper): the POS column as plain
// labels (no tag scheme: accuracy only). The baseline is bilstm_crf_pos.jsonnet.
// Data: the fixtures (default, the POS column), conll2000_pos or ewt_upos (training_config/data.libsonnet).
local data = import "data.libsonnet";
local base = (import "seq2biseq.jsonnet").fixture_config;
local pos_reader = base.dataset_reader + { tag_column: 1, file_tag_scheme: null };

data.on(base + {
  on_real_data+:: { task: "POS" },
  dataset_reader: pos_reader,
  validation_dataset_reader: pos_reader,
  model+: { tag_scheme: null },
})
