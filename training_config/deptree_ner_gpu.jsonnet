// deptree_ner's GPU recipe: batches of 32 sentences instead of 16 (half the kernel launches an
// epoch), the rate's decay 0.95 an epoch instead of 0.9 (about the same decay per step), patience 10
// (larger batches plateau longer), up to 60 epochs. CoNLL-2003 dev against the recipe: docs/gpu.md.
// Data: the fixtures (default), conll2003, wnut17 or uner_ewt (training_config/data.libsonnet).
local data = import "data.libsonnet";

data.on((import "deptree_ner.jsonnet").fixture_config + {
  data_loader+: { batch_sampler+: { batch_size: 32 } },
  trainer+: {
    learning_rate_scheduler+: { gamma: 0.95 },
    patience: 10,
    num_epochs: 60,
  },
})
