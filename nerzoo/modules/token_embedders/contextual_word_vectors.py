import logging
from typing import Dict, List, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules import ScalarMix
from allennlp.modules.token_embedders import PretrainedTransformerMismatchedEmbedder, TokenEmbedder

from nerzoo.transformer_models import local_model_directory

logger = logging.getLogger(__name__)


@TokenEmbedder.register("contextual_word_vectors")
class ContextualWordVectors(PretrainedTransformerMismatchedEmbedder):
    """
    Contextual word vectors from a local Hugging Face transformer, used as ELMo is used by Aguilar &
    Solorio (2019), "Dependency-Aware Named Entity Recognition with Relative and Global Attentions",
    https://arxiv.org/abs/1909.05166, §3.1 and appendix A (after Peters et al. 2018, eq. 1): the
    transformer is frozen, and a word's vector is a learned softmax-weighted sum of all of its
    layers, scaled by a learned `gamma`,

        v_k = gamma * sum_j softmax(s)_j * h_{k,j},   j = 0 (the embedding layer) .. L,

    where `h_{k,j}` is layer j averaged over word k's word pieces (AllenNLP's
    `pretrained_transformer_mismatched` pooling; `sub_token_mode: "first"` takes the first piece).
    Use it with AllenNLP's `pretrained_transformer_mismatched` indexer with the same `model_name`
    and `max_length`; concatenate it with the word and character vectors in the text field embedder.

    A frozen transformer (in eval mode, as ELMo's biLM) gives a sentence the same layers every epoch,
    so they are cached: each sentence's pooled layers, `(L + 1, num_words, hidden_size)` float32 on
    the CPU, keyed by its word pieces and offsets, until the cache holds `cache_size_mb` (no
    eviction; not saved in the archive).  A word costs `4 * (L + 1) * hidden_size` bytes: 10.5 KiB
    for all-MiniLM-L6-v2, about 3.1 GiB for CoNLL-2003's three files.

    `train_parameters: true` fine-tunes the transformer (its dropout on in training), with no cache.

    Registered as a `TokenEmbedder` with name "contextual_word_vectors".

    # Parameters

    model_name : `str`, required
        A local Hugging Face model directory (nothing is downloaded; see `nerzoo.transformer_models`).
    max_length : `int`, optional (default = `None`)
        Folds longer inputs into segments of this many word pieces, as AllenNLP's embedder does.
    train_parameters : `bool`, optional (default = `False`)
        Fine-tune the transformer.  The cache is used only when this is `False`.
    last_layer_only : `bool`, optional (default = `False`)
        Use the last layer only (no mix); the cache then holds one layer.
    sub_token_mode : `str`, optional (default = `"avg"`)
        `"avg"` or `"first"` word piece of each word.
    cache_size_mb : `int`, optional (default = `4096`)
        Memory bound of the cache in MiB; 0 turns it off.
    load_weights, tokenizer_kwargs, transformer_kwargs
        As for AllenNLP's `pretrained_transformer_mismatched`.
    """

    def __init__(
        self,
        model_name: str,
        max_length: Optional[int] = None,
        train_parameters: bool = False,
        last_layer_only: bool = False,
        sub_token_mode: str = "avg",
        cache_size_mb: int = 4096,
        load_weights: bool = True,
        tokenizer_kwargs: Optional[Dict] = None,
        transformer_kwargs: Optional[Dict] = None,
    ) -> None:
        model_name = local_model_directory(model_name)
        if sub_token_mode not in ("avg", "first"):
            raise ConfigurationError(f"sub_token_mode must be 'avg' or 'first', got {sub_token_mode!r}")
        if cache_size_mb < 0:
            raise ConfigurationError(f"cache_size_mb must be >= 0, got {cache_size_mb}")
        super().__init__(
            model_name,
            max_length=max_length,
            train_parameters=train_parameters,
            last_layer_only=True,
            load_weights=load_weights,
            tokenizer_kwargs=tokenizer_kwargs,
            transformer_kwargs=transformer_kwargs,
            sub_token_mode=sub_token_mode,
        )
        self.train_parameters = train_parameters
        self.last_layer_only = last_layer_only
        self.num_layers = 1 if last_layer_only else self._matched_embedder.config.num_hidden_layers + 1
        self.scalar_mix = None if last_layer_only else ScalarMix(self.num_layers)
        if not train_parameters:
            self._matched_embedder.eval_mode = True
            self._matched_embedder.transformer_model.eval()
        self.cache_size_bytes = cache_size_mb * 2**20 if not train_parameters else 0
        self._cache: Dict[bytes, torch.Tensor] = {}
        self._cache_bytes = 0
        self._cache_full_logged = False

    @property
    def cache_info(self) -> Dict[str, int]:
        """Sentences and bytes held by the cache."""
        return {"sentences": len(self._cache), "bytes": self._cache_bytes}

    def clear_cache(self) -> None:
        self._cache.clear()
        self._cache_bytes = 0
        self._cache_full_logged = False

    def forward(  # type: ignore
        self,
        token_ids: torch.LongTensor,
        mask: torch.BoolTensor,
        offsets: torch.LongTensor,
        wordpiece_mask: torch.BoolTensor,
        type_ids: Optional[torch.LongTensor] = None,
        segment_concat_mask: Optional[torch.BoolTensor] = None,
    ) -> torch.Tensor:
        """
        # Parameters

        token_ids : `(batch_size, num_wordpieces)`, from the `pretrained_transformer_mismatched` indexer
        mask : `(batch_size, num_words)`
        offsets : `(batch_size, num_words, 2)`, each word's first and last word piece
        wordpiece_mask : `(batch_size, num_wordpieces)`
        type_ids, segment_concat_mask : as for AllenNLP's `pretrained_transformer_mismatched`

        # Returns

        `(batch_size, num_words, hidden_size)`; padded words get zeros.
        """
        inputs = (token_ids, mask, offsets, wordpiece_mask, type_ids, segment_concat_mask)
        if self.cache_size_bytes == 0 or torch.jit.is_tracing():  # a trace (`allennlp export`) has no cache
            return self._mix(self._word_layers(*inputs))
        # Mixed from (num_layers, real words of the batch, hidden_size), row after row.
        words = self._mix(self._cached_word_layers(*inputs))
        return words.new_zeros(*mask.shape, words.size(-1)).masked_scatter(mask.unsqueeze(-1), words)

    def _mix(self, layers: torch.Tensor) -> torch.Tensor:
        """
        AllenNLP's `ScalarMix` (its parameters and, without layer norm, its function) over the
        first dimension of `layers`, `(num_layers, ..., hidden_size)`, as one matrix-vector product.
        """
        if self.scalar_mix is None:
            return layers[0]
        weights = torch.softmax(torch.cat(list(self.scalar_mix.scalar_parameters)), dim=0) * self.scalar_mix.gamma
        flat = layers.reshape(self.num_layers, -1).to(weights.dtype)
        return (weights @ flat).view(layers.shape[1:])

    def _word_layers(
        self,
        token_ids: torch.LongTensor,
        mask: torch.BoolTensor,
        offsets: torch.LongTensor,
        wordpiece_mask: torch.BoolTensor,
        type_ids: Optional[torch.LongTensor],
        segment_concat_mask: Optional[torch.BoolTensor],
    ) -> torch.Tensor:
        """
        Every layer pooled to words: `(num_layers, batch_size, num_words, hidden_size)`, zeros at
        padding; long inputs folded into `max_length` segments by AllenNLP's own fold and unfold.
        """
        matched = self._matched_embedder
        if type_ids is not None and type_ids.max() == 0:
            type_ids = None
        fold = matched._max_length is not None and token_ids.size(1) > matched._max_length
        if fold:
            batch_size, num_concat_pieces = token_ids.size()
            token_ids, segment_concat_mask, type_ids = matched._fold_long_sequences(
                token_ids, segment_concat_mask, type_ids
            )
        transformer_mask = segment_concat_mask if matched._max_length is not None else wordpiece_mask
        parameters = {"input_ids": token_ids, "attention_mask": transformer_mask.float()}
        if type_ids is not None:
            parameters["token_type_ids"] = type_ids
        with torch.set_grad_enabled(self.train_parameters and torch.is_grad_enabled()):
            output = matched.transformer_model(**parameters, output_hidden_states=not self.last_layer_only)
            states = (output.last_hidden_state,) if self.last_layer_only else output.hidden_states
            # The transformer's layers at each word piece: (batch_size, num_wordpieces, num_layers, hidden_size).
            pieces = torch.stack(states, dim=2).float()
            if fold:
                width = pieces.shape[2:]
                unfolded = matched._unfold_long_sequences(
                    pieces.flatten(2), segment_concat_mask, batch_size, num_concat_pieces
                )
                pieces = unfolded.reshape(*unfolded.shape[:2], *width)
        batch_size, num_pieces = pieces.shape[:2]
        flat = pieces.reshape(batch_size, num_pieces, -1)
        # span_pieces: (batch_size, num_words, max_span_length, num_layers * hidden_size)
        span_pieces, span_mask = _span_pieces(flat, offsets)
        span_mask = span_mask & mask.unsqueeze(-1)
        if self.sub_token_mode == "first":
            words = span_pieces[:, :, 0] * span_mask[:, :, :1]
        else:
            span_pieces = span_pieces * span_mask.unsqueeze(-1)
            lengths = span_mask.sum(-1, keepdim=True)
            words = span_pieces.sum(2) / lengths.clamp(min=1)
        return words.reshape(batch_size, words.size(1), self.num_layers, -1).movedim(2, 0)

    def _cached_word_layers(self, *inputs: Optional[torch.Tensor]) -> torch.Tensor:
        """
        The layers of the batch's words, `(num_layers, words in the batch, hidden_size)`, each
        sentence's taken from the cache when there, computed by `_word_layers` and stored if not.
        """
        token_ids, mask, offsets, wordpiece_mask, type_ids, segment_concat_mask = inputs
        piece_mask = segment_concat_mask if self._matched_embedder._max_length is not None else wordpiece_mask
        num_pieces = piece_mask.sum(-1).tolist()
        num_words = mask.sum(-1).tolist()
        ids_host = token_ids.cpu().numpy()
        offsets_host = offsets.cpu().numpy()
        type_ids_host = type_ids.cpu().numpy() if type_ids is not None else None
        keys: List[bytes] = []
        for row in range(token_ids.size(0)):
            key = ids_host[row, : num_pieces[row]].tobytes() + b"|" + offsets_host[row, : num_words[row]].tobytes()
            if type_ids_host is not None:
                key += b"|" + type_ids_host[row, : num_pieces[row]].tobytes()
            keys.append(key)
        sentences: List[Optional[torch.Tensor]] = [self._cache.get(key) for key in keys]
        missing = [row for row, sentence in enumerate(sentences) if sentence is None]
        if missing:
            rows = torch.tensor(missing, device=token_ids.device)
            pieces = max(num_pieces[row] for row in missing)
            words = max(num_words[row] for row in missing)
            computed = self._word_layers(
                token_ids[rows, :pieces],
                mask[rows, :words],
                offsets[rows, :words],
                wordpiece_mask[rows, :pieces],
                type_ids[rows, :pieces] if type_ids is not None else None,
                segment_concat_mask[rows, :pieces] if segment_concat_mask is not None else None,
            ).cpu()
            for index, row in enumerate(missing):
                # Layer-major, so that a batch's words are one matrix for the mix.
                sentence = computed[:, index, : num_words[row]].clone(memory_format=torch.contiguous_format)
                sentences[row] = sentence
                self._store(keys[row], sentence)
        return torch.cat(sentences, dim=1).to(token_ids.device, non_blocking=True)  # type: ignore[arg-type]

    def _store(self, key: bytes, sentence: torch.Tensor) -> None:
        size = sentence.numel() * sentence.element_size() + len(key)
        if key in self._cache:
            return
        if self._cache_bytes + size > self.cache_size_bytes:
            if not self._cache_full_logged:
                logger.warning(
                    "contextual_word_vectors: cache full at %d sentences (%.0f MiB, cache_size_mb); "
                    "further sentences are recomputed",
                    len(self._cache),
                    self._cache_bytes / 2**20,
                )
                self._cache_full_logged = True
            return
        self._cache[key] = sentence
        self._cache_bytes += size


def _span_pieces(pieces: torch.Tensor, offsets: torch.LongTensor) -> Tuple[torch.Tensor, torch.BoolTensor]:
    """
    allennlp's `batched_span_select` (each word's pieces and their mask; a word at `(-1, -1)` has
    none), its widest word kept a tensor so that a trace (`allennlp export`) follows it.
    """
    starts, ends = offsets.split(1, dim=-1)
    widths = ends - starts
    span_range = torch.arange(widths.max() + 1, device=pieces.device).view(1, 1, -1)
    indices = starts + span_range
    span_mask = (span_range <= widths) & (indices < pieces.size(1)) & (indices >= 0)
    indices = (indices * span_mask).flatten(1)
    selected = pieces.gather(1, indices.unsqueeze(-1).expand(-1, -1, pieces.size(-1)))
    return selected.view(*span_mask.shape, pieces.size(-1)), span_mask
