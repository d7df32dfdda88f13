import torch

from nerzoo.modules.fofe.span_features import gather_positions, join_words, span_features
from nerzoo.modules.fofe.spans import FlatSpans
from tests.modules.fofe_ner_batch import ENTITIES, first_pass_entities_by_hand, fofe, fofe_batch


def test_span_features_equal_the_recursion_on_each_span():
    batch = fofe_batch()
    model, mask, spans = batch.model, batch.mask, batch.spans
    with torch.no_grad():
        words, characters = batch.codes()
        cnn = batch.cnn_features(characters, spans)
        features = span_features(words, characters, spans, model.alpha, model.character_alpha, cnn).double()
        embedded = {name: embedder(**batch.tensors["tokens"][name]) for name, embedder in model.word_embedders.items()}
        character_ids = batch.tensors["tokens"]["token_characters"]["token_characters"]
        separator = model.character_embedding.num_embeddings - 1
        alpha, beta = model.alpha, model.character_alpha
        assert len(spans.batch) == int(batch.span_mask.sum()) and len(set(spans.batch.tolist())) == mask.size(0)
        for index, (sentence, start, end) in enumerate(zip(*(values.tolist() for values in spans))):
            length = int(mask[sentence].sum())
            expected = []
            for vectors in embedded.values():
                vectors = list(vectors[sentence, :length])
                dim = vectors[0].size(0)
                expected += [
                    torch.stack(vectors[start:end]).double().sum(0),
                    fofe(vectors[:end], alpha, dim),
                    fofe(vectors[:start], alpha, dim),
                    fofe(vectors[start:][::-1], alpha, dim),
                    fofe(vectors[end:][::-1], alpha, dim),
                ]
            ids = []
            for word in range(start, end):
                if word > start:
                    ids.append(separator)
                ids += [int(i) for i in character_ids[sentence, word] if i > 0]
            ids = torch.tensor(ids)
            characters = list(model.character_embedding(ids))
            expected += [fofe(characters, beta), fofe(characters[::-1], beta)]
            fragment = model.cnn_character_embedding(ids).t().unsqueeze(0)
            for kernel_size, convolution in zip(model.character_cnn.kernel_sizes, model.character_cnn.convolutions):
                if fragment.size(-1) >= kernel_size:
                    expected.append(torch.relu(convolution(fragment)).max(-1).values.view(-1).double())
                else:
                    expected.append(torch.zeros(convolution.out_channels, dtype=torch.float64))
            torch.testing.assert_close(features[index], torch.cat(expected), rtol=1e-4, atol=1e-5)


def test_second_pass_contexts_see_first_pass_entities_as_type_tokens():
    batch = fofe_batch(4)
    model, mask, spans = batch.model, batch.mask, batch.spans
    length = int(mask[0].sum())
    assert length >= 6
    name, embedder = next(iter(model.word_embedders.items()))
    types = torch.nn.Embedding(len(model.entity_types), embedder.get_output_dim())
    with torch.no_grad():
        words, _ = batch.codes(first_pass_entities_by_hand(mask), types)
        features = span_features(words, None, spans, model.alpha, model.character_alpha).double()
        embedded = list(embedder(**batch.tensors["tokens"][name])[0, :length])
    alpha, dim = model.alpha, embedded[0].size(0)

    def left_units(boundary):
        units, position = [], 0
        while position < boundary:
            entity = next((e for e in ENTITIES if e[0] == position), None)
            if entity is not None and entity[1] <= boundary:
                units.append(types.weight[entity[2]])
                position = entity[1]
            else:
                units.append(embedded[position])
                position += 1
        return units

    def right_units(boundary):
        units, position = [], length
        while position > boundary:
            entity = next((e for e in ENTITIES if e[1] == position), None)
            if entity is not None and entity[0] >= boundary:
                units.append(types.weight[entity[2]])
                position = entity[0]
            else:
                units.append(embedded[position - 1])
                position -= 1
        return units  # already right to left

    for index in (spans.batch == 0).nonzero().view(-1).tolist():
        start, end = int(spans.starts[index]), int(spans.ends[index])
        fragment = embedded[start:end]
        expected = [
            torch.stack(fragment).double().sum(0),
            fofe(left_units(start) + fragment, alpha, dim),
            fofe(left_units(start), alpha, dim),
            fofe(right_units(end) + fragment[::-1], alpha, dim),
            fofe(right_units(end), alpha, dim),
        ]
        torch.testing.assert_close(
            features[index], torch.cat(expected).detach(), rtol=1e-4, atol=1e-5, msg=f"span {start}-{end}"
        )


def test_joined_words_and_gathered_positions():
    character_ids = torch.tensor([[[3, 4, 0], [5, 0, 0], [0, 0, 0]], [[6, 7, 8], [0, 0, 0], [0, 0, 0]]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    flat, offsets, lengths = join_words(character_ids, mask, separator=9)
    assert flat.tolist() == [3, 4, 9, 5, 9, 6, 7, 8, 9]
    assert offsets.tolist() == [[0, 3, 0], [5, 0, 0]] and lengths.tolist() == [[2, 1, 0], [3, 0, 0]]
    values = torch.arange(12.0).view(2, 3, 2)
    spans = FlatSpans(torch.tensor([1, 0]), torch.tensor([2, 0]), torch.tensor([3, 1]))
    assert gather_positions(values, spans.batch, spans.starts).tolist() == [[10.0, 11.0], [0.0, 1.0]]
