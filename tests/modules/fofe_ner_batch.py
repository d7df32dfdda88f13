"""A batch of the tiny FOFE-NER experiment (its data, and a model built from its config) for the tests of its parts."""

from typing import Dict, List, NamedTuple, Optional, Tuple

import torch
from allennlp.common import Params
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.models import Model

import nerzoo  # noqa: F401
from nerzoo.models.fofe_ner import FofeNer
from nerzoo.modules.fofe.span_features import CharacterCodes, WordCodes, character_codes, word_codes
from nerzoo.modules.fofe.spans import FlatSpans, enumerate_spans
from tests import FIXTURES_ROOT

CONFIG = FIXTURES_ROOT / "experiments" / "fofe_ner_tiny.jsonnet"
DATA = FIXTURES_ROOT / "conll2003" / "train.txt"


def fofe(vectors, alpha, dim=None):
    """Eq. 3.1 step by step; the empty sequence codes to 0."""
    code = torch.zeros(dim if dim is not None else vectors[0].size(0), dtype=torch.float64)
    for vector in vectors:
        code = alpha * code + vector.double()
    return code


# First-pass entities of sentence 0, by hand: [1, 3) type 0 and [4, 5) type 1.
ENTITIES = [(1, 3, 0), (4, 5, 1)]


def first_pass_entities_by_hand(mask):
    in_entity = torch.zeros_like(mask)
    entity_start = torch.arange(mask.size(1)).repeat(mask.size(0), 1)
    entity_end = entity_start + 1
    entity_type = torch.zeros_like(entity_start)
    for start, end, label in ENTITIES:
        in_entity[0, start:end] = True
        entity_start[0, start:end] = start
        entity_end[0, start:end] = end
        entity_type[0, start:end] = label
    return {"in_entity": in_entity, "start": entity_start, "end": entity_end, "type": entity_type}


class FofeBatch(NamedTuple):
    model: FofeNer
    tensors: Dict
    metadata: List[Dict]
    mask: torch.BoolTensor
    starts: torch.LongTensor
    ends: torch.LongTensor
    span_mask: torch.BoolTensor
    spans: FlatSpans  # every real span, sentence by sentence

    def codes(
        self, entities: Optional[Dict[str, torch.Tensor]] = None, type_embedding: Optional[torch.nn.Embedding] = None
    ) -> Tuple[List[WordCodes], CharacterCodes]:
        """The model's codes of the batch (the first word vocabulary only, with `entities`)."""
        model, tokens, mask = self.model, self.tensors["tokens"], self.mask
        embedders = list(model.word_embedders.items())[: 1 if entities is not None else None]
        words = [
            word_codes(embedder(**tokens[name]) * mask.unsqueeze(-1), mask, model.alpha, entities, type_embedding)
            for name, embedder in embedders
        ]
        character_ids = tokens["token_characters"]["token_characters"]
        return words, character_codes(character_ids, mask, model.character_embedding, model.character_alpha)

    def cnn_features(self, characters: CharacterCodes, spans: FlatSpans) -> torch.Tensor:
        model = self.model
        return characters.cnn_features(
            model.cnn_character_embedding, model.character_cnn, *characters.span_offsets(spans)
        )


def fofe_batch(count: int = 6) -> FofeBatch:
    params = Params.from_file(str(CONFIG))
    instances = list(DatasetReader.from_params(params["dataset_reader"]).read(str(DATA)))
    vocab = Vocabulary.from_instances(instances)
    model = Model.from_params(vocab=vocab, params=params["model"]).eval()
    batch = Batch(instances[:count])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    mask = tensors["tokens"]["tokens"]["tokens"] > 0
    starts, ends, span_mask = enumerate_spans(mask, model.max_span_width)
    return FofeBatch(
        model, tensors, tensors["metadata"], mask, starts, ends, span_mask, FlatSpans.where(span_mask, starts, ends)
    )
