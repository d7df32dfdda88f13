// ME-CRF for NER over whole documents: Liu, Baldwin & Cohn (2017), "Capturing Long-range Contextual
// Dependencies with Memory-enhanced Conditional Random Fields", IJCNLP, https://aclanthology.org/I17-1056.
// Settings of §5.2: 50-d word embeddings kept fixed (GloVe 6B 50d in place of SENNA, as the paper
// reports GloVe works better), concatenated with the six binary word-shape features; BiGRU memories
// of hidden size 50 (W_m 50 x 50); one memory hop over every earlier word of the document; dropout
// keep rate 0.8 on the GRUs' inputs and outputs; a CRF over the BIO tags of each sentence (§3, §5.1;
// the memory spans the document); Adam, batch size 32 (documents), up to 100 epochs with early
// stopping on dev span F1. One CRF chain over the whole document, its transitions crossing sentence
// boundaries: -o '{"model.head.crf_per_sentence": false}'.
//
// Trains on the fixtures by default. For CoNLL-2003 (see README "ME-CRF"), override the data and the
// pretrained file:
//   -o '{"train_data_path": "../shared/data/conll2003/eng.train",
//        "validation_data_path": "../shared/data/conll2003/eng.testa",
//        "test_data_path": "../shared/data/conll2003/eng.testb",
//        "model.text_field_embedder.token_embedders.tokens.pretrained_file": "<glove.6B.50d>",
//        "vocabulary.pretrained_files.tokens": "<glove.6B.50d>"}'
// Variants: -o '{"model.memory.num_hops": 2}' (K hops), '{"model.memory.window": 256}' (bounded
// memory for very long documents), '{"model.head.use_crf": false}' (MEMNET, softmax instead of CRF).
// Batches hold documents of similar length in tokens (the `bucket` batch sampler sorted by the
// document's `tokens`, 10% noise, shuffled batches; validation batches in length order without
// noise): the GRUs and the memory run over the longest document of a batch, and CoNLL-2003
// documents range from a few to over a thousand tokens. See bilstm_crf.jsonnet for batch sizes.
local glove = "fixtures/embeddings/tiny_glove.txt";
local word_dim = 50;
local num_shape_features = 6;
local hidden_dim = 50;

{
  dataset_reader: {
    type: "conll_columns",
    tag_column: 3,
    file_tag_scheme: "IOB1",
    tag_scheme: "BIO",
    document_level: true,
    token_indexers: {
      tokens: { type: "single_id", lowercase_tokens: true },
      shape: { type: "lexical_features" },
    },
  },
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  // Every GloVe word joins the vocabulary: the embeddings are fixed, so test words unseen in
  // training keep their pretrained vectors.
  vocabulary: {
    type: "from_instances",
    pretrained_files: { tokens: glove },
    min_pretrained_embeddings: { tokens: 500000 },
  },
  model: {
    type: "me_crf",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: word_dim, pretrained_file: glove, trainable: false },
        shape: { type: "lexical_features" },
      },
    },
    memory: { hidden_dim: hidden_dim, memory_dim: hidden_dim, num_hops: 1, causal: true, dropout: 0.2 },
    head: { tag_scheme: "BIO", constrain_crf_decoding: true, crf_per_sentence: true },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["tokens"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 32, sorting_keys: ["tokens"], shuffle: false } },
  trainer: {
    // The paper gives no learning rate; 0.01 learns the fixtures in about 20 epochs.
    optimizer: { type: "adam", lr: 0.01 },
    num_epochs: 100,
    patience: 10,
    validation_metric: "+f1-measure-overall",
  },
}
