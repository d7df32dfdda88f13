// bilstm_crf's GPU recipe: batches of 32 sentences instead of 10 (under a third of the kernel launches
// an epoch) with the SGD that goes with them: the same rate on the summed loss, the gradient norm
// clipped at 16 instead of 5 (in proportion to the batch), patience 10 (with 5 it stopped on the longer
// plateaus of larger batches). CoNLL-2003 dev within the recipe's seed spread; docs/gpu.md: The GPU recipes.
// On a GPU the training loss runs as CUDA graphs (`cuda_graphs`; on the CPU it does nothing).
// Data: the fixtures (default), conll2003, uner_ewt, wnut17 (training_config/data.libsonnet).
local data = import "data.libsonnet";

data.on((import "bilstm_crf.jsonnet").fixture_config + {
  data_loader+: { batch_sampler+: { batch_size: 32 } },
  trainer+: { grad_norm: 16.0, patience: 10, num_epochs: 60, callbacks: [{ type: "freeze_loaded_data" }, { type: "cuda_graphs" }, { type: "leave_process_group" }] },
})
