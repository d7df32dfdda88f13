// bilstm_crf's GPU recipe: batches of 64 sentences instead of 10, so that a GPU epoch is a sixth of
// the launches, with the optimiser that goes with them: Adam at 0.004 (twice deptree_ner's rate for
// four times its batches), x0.9 after every epoch. Model, data and embeddings as in bilstm_crf.jsonnet;
// docs/RESULTS.md compares the two on CoNLL-2003 dev.
// Data: NERZOO_DATA=fixtures (default), conll2003, uner_ewt, wnut17 (training_config/data.libsonnet).
local data = import "data.libsonnet";

data.on((import "bilstm_crf.jsonnet").fixture_config + {
  data_loader+: { batch_sampler+: { batch_size: 64 } },
  trainer+: {
    optimizer: { type: "adam", lr: 0.004 },
    learning_rate_scheduler: { type: "exponential", gamma: 0.9 },
  },
})
