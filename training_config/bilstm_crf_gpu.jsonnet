// bilstm_crf's GPU recipe: batches of 20 sentences instead of 10, so that a GPU epoch is half the
// kernel launches, with the rate that goes with them: SGD's rate of 0.015 applies to the batch's
// summed loss, so each step moves twice as far (the linear scaling of Goyal et al. 2017), and the
// gradient norm is clipped at 10 in place of 5. Model, data, embeddings and schedule as in
// bilstm_crf.jsonnet; docs/RESULTS.md compares the two on CoNLL-2003 dev, and Adam on batches of 64.
// Data: NERZOO_DATA=fixtures (default), conll2003, uner_ewt, wnut17 (training_config/data.libsonnet).
local data = import "data.libsonnet";

data.on((import "bilstm_crf.jsonnet").fixture_config + {
  data_loader+: { batch_sampler+: { batch_size: 20 } },
  trainer+: { grad_norm: 10.0 },
})
