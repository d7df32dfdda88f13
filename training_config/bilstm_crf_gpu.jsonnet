// bilstm_crf's GPU recipe: batches of 64 sentences instead of 10, so that a GPU epoch is a sixth of
// the kernel launches, with the optimiser that goes with them: Adam at 0.004, decayed x0.9 after
// every epoch (SGD's summed-loss rate scaled to the larger batches did worse: docs/gpu.md). Model,
// data, embeddings and gradient clipping as in bilstm_crf.jsonnet; docs/RESULTS.md compares the two
// on CoNLL-2003 dev.
// Data: NERZOO_DATA=fixtures (default), conll2003, uner_ewt, wnut17 (training_config/data.libsonnet).
local data = import "data.libsonnet";

data.on((import "bilstm_crf.jsonnet").fixture_config + {
  data_loader+: { batch_sampler+: { batch_size: 64 } },
  trainer+: {
    optimizer: { type: "adam", lr: 0.004 },
    learning_rate_scheduler: { type: "exponential", gamma: 0.9 },
  },
})
