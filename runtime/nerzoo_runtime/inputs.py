"""
The inputs a tagger reads, as `allennlp predict` reads them: a raw text (tokenised by spaCy), a list
of tokens, a document as a list of token lists (its sentences), or one of its input lines:
`{"sentence": text}`, `{"tokens": [...]}`, `{"sentences": [[...], ...]}` or `{"document": text}`.
Each becomes its words, their character offsets `[start, end)` (in a token list's tokens joined by
single spaces), the text they are in and the `[start, end)` words of its sentences (a raw document
split by the pipeline's parser, else spaCy's sentencizer).
"""

from typing import Any, Callable, Dict, List, Sequence, Tuple, Union

from nerzoo_runtime.errors import TaggerInputError

Input = Union[str, Sequence[str], Sequence[Sequence[str]], Dict[str, Any]]
Spans = List[Tuple[int, int]]
Words = Tuple[List[str], Spans, str, Spans]
_KINDS = {"sentence": str, "document": str, "tokens": (list, tuple), "sentences": (list, tuple)}


def space_joined(words: Sequence[str]) -> Tuple[Spans, str]:
    """Character offsets of `words` in `" ".join(words)`, and that text."""
    offsets, position = [], 0
    for word in words:
        offsets.append((position, position + len(word)))
        position += len(word) + 1
    return offsets, " ".join(words)


def document_words(doc) -> Tuple[List[str], Spans, Spans]:
    """A spaCy doc's words (whitespace tokens left out), their character offsets and the words of its sentences."""
    words, offsets, sentences = [], [], []
    for sentence in doc.sents:
        start = len(words)
        for token in sentence:
            if not token.is_space:
                words.append(token.text)
                offsets.append((token.idx, token.idx + len(token.text)))
        if len(words) > start:
            sentences.append((start, len(words)))
    return words, offsets, sentences


def parsed_document(nlp, text: str):
    """`text` split into sentences by `nlp`'s parser or senter (only the pipes they need run), else by
    spaCy's sentencizer after `nlp`'s language's rules."""
    import spacy

    sentence_pipes = ("parser", "senter", "sentencizer")
    if not any(nlp.has_pipe(name) for name in sentence_pipes):
        nlp = spacy.blank(nlp.lang)
        nlp.add_pipe("sentencizer")
    with nlp.select_pipes(enable=[name for name in nlp.pipe_names if name in ("tok2vec", *sentence_pipes)]):
        return nlp(text)


def read_input(item: Input, make_doc: Callable[[str], Any], parse_document: Callable[[str], Any]) -> Words:
    """
    The words of one input, their offsets, their text and its sentences.  `make_doc(text)` tokenises a
    raw text, `parse_document(text)` also splits it into sentences (both give spaCy docs).  An input
    that is none of the above raises `TaggerInputError`.
    """
    if isinstance(item, dict):
        ((key, value),) = item.items() if len(item) == 1 else [(None, None)]
        if key not in _KINDS or not isinstance(value, _KINDS[key]):
            raise TaggerInputError(
                f'an input object needs one key, "sentence" or "document" (a text), "tokens" (a token list) or '
                f'"sentences" (token lists), got {str(item)[:200]}'
            )
        nested = [isinstance(part, (list, tuple)) for part in value] if key in ("tokens", "sentences") else []
        if any(nested) if key == "tokens" else not all(nested):
            wanted = "tokens" if key == "tokens" else "token lists"
            raise TaggerInputError(f'"{key}" must be a list of {wanted}, got {str(value)[:200]}')
        if key == "document":
            words, offsets, sentences = document_words(parse_document(value))
            return words, offsets, value, sentences
        return read_input(value, make_doc, parse_document)
    if isinstance(item, (list, tuple)) and item and all(isinstance(sentence, (list, tuple)) for sentence in item):
        sentences, words = [], []
        for sentence in filter(None, item):
            sentences.append((len(words), len(words) + len(sentence)))
            words.extend(sentence)
        return (*read_input(words, make_doc, parse_document)[:3], sentences)
    if isinstance(item, str):
        tokens = [token for token in make_doc(item) if not token.is_space]
        offsets = [(token.idx, token.idx + len(token.text)) for token in tokens]
        return [token.text for token in tokens], offsets, item, [(0, len(tokens))]
    if isinstance(item, (list, tuple)):
        if not all(isinstance(word, str) and word.strip() for word in item):
            raise TaggerInputError(f"a token list must hold non-blank strings, got {str(item)[:200]}")
        offsets, text = space_joined(item)
        return list(item), offsets, text, [(0, len(item))]
    raise TaggerInputError(f"an input is a text or a list of tokens, got {type(item).__name__}: {str(item)[:200]}")
