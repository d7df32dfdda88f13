import json

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, DatasetReader, Vocabulary
from allennlp.data.dataset_readers.dataset_reader import WorkerInfo
from allennlp.data.tokenizers import SpacyTokenizer
from allennlp.nn import util

from nerzoo.data.dataset_readers.thread_discourse import (
    CNET_DIALOGUE_ACTS,
    EMPTY_POST_TOKEN,
    ThreadDiscourseReader,
    ThreadFormatError,
    punctuation_counts,
)
from tests import FIXTURES_ROOT

THREADS = FIXTURES_ROOT / "thread_discourse"
TRAIN = THREADS / "train.jsonl"


@pytest.fixture(scope="module")
def reader():
    return ThreadDiscourseReader()


@pytest.fixture(scope="module")
def train(reader):
    return list(reader.read(TRAIN))


def _raw_threads(path):
    """The threads straight from the file, without the reader."""
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def _write_lines(tmp_path, lines, name="threads.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _hand_thread():
    return _raw_threads(TRAIN)[0]


def _unlabelled(thread):
    posts = [
        {key: value for key, value in post.items() if key not in ("links", "dialogue_acts")} for post in thread["posts"]
    ]
    return {**thread, "posts": posts}


# --------------------------------------------------------------------------------------------------
# Reading the fixtures


@pytest.mark.parametrize("split, num_threads, num_posts", [("train", 24, 138), ("dev", 8, 44), ("test", 8, 52)])
def test_fixture_counts(reader, split, num_threads, num_posts):
    path = THREADS / f"{split}.jsonl"
    raw = _raw_threads(path)
    instances = list(reader.read(path))
    assert len(instances) == len(raw) == num_threads
    assert sum(instance["metadata"]["num_posts"] for instance in instances) == num_posts
    assert sum(len(thread["posts"]) for thread in raw) == num_posts
    for instance, thread in zip(instances, raw):
        size = len(thread["posts"])
        assert 3 <= size <= 9
        assert instance["metadata"]["thread_id"] == thread["thread_id"]
        assert len(instance["titles"]) == len(instance["texts"]) == len(instance["tags"]) == size
        assert tuple(instance["structural_features"].tensor.shape) == (size, 2)
        assert tuple(instance["punctuation_features"].tensor.shape) == (size, 3)
        assert tuple(instance["links"].tensor.shape) == (size,)
        assert set(instance["tags"].labels) <= set(CNET_DIALOGUE_ACTS)
        assert instance["metadata"]["sentence_spans"] == [(0, size)]


def test_fixtures_use_every_dialogue_act_and_are_small():
    acts = {
        act
        for split in ("train", "dev", "test")
        for thread in _raw_threads(THREADS / f"{split}.jsonl")
        for post in thread["posts"]
        for act in post["dialogue_acts"]
    }
    assert acts == set(CNET_DIALOGUE_ACTS)
    for path in THREADS.glob("*.jsonl"):
        assert path.stat().st_size < 40_000


def test_hand_checked_thread(train):
    instance = train[0]
    metadata = instance["metadata"]
    assert metadata["thread_id"] == "train-01"
    assert metadata["source"] == f"{TRAIN}:1"
    assert metadata["num_posts"] == 5
    # No "initiator" keys in this thread: derived from the authors (mike_r wrote posts 1, 3 and 5).
    expected = torch.tensor([[1.0, 0.2], [0.0, 0.4], [1.0, 0.6], [0.0, 0.8], [1.0, 1.0]])
    assert torch.allclose(instance["structural_features"].tensor, expected)
    assert instance["structural_features"].tensor.dtype == torch.float32
    # Post 2's "?" is inside its URL; post 4 has "www." and "!"; post 5 "!" and "!!".
    assert instance["punctuation_features"].tensor.tolist() == [[1, 0, 0], [0, 0, 1], [1, 0, 0], [0, 1, 1], [0, 3, 0]]
    assert instance["punctuation_features"].tensor.dtype == torch.float32
    assert instance["tags"].labels == [
        "Question-Question",
        "Answer-Answer",
        "Question-Add",
        "Answer-Answer",
        "Answer-Objection",
    ]
    assert instance["tags"]._label_namespace == "labels"
    assert instance["links"].tensor.tolist() == [0, 1, 1, 3, 4]
    assert instance["links"].tensor.dtype == torch.long
    assert metadata["gold_links"] == [[0], [1], [1], [3], [4, 2]]
    assert metadata["gold_dialogue_acts"][4] == ["Answer-Objection", "Resolution"]
    titles = [[token.text for token in field.tokens] for field in instance["titles"]]
    assert titles[0] == ["Wireless", "keeps", "dropping", "on", "new", "router"]
    assert titles[3] == ["Channel"]
    assert titles[4] == [EMPTY_POST_TOKEN]
    text = [token.text for token in instance["texts"][3].tokens]
    assert "www.wifi-help.example.org" in text and text[-1] == "!"
    assert metadata["words"][0] == "Wireless keeps dropping on new router"
    assert metadata["words"][4] == "Changing the channel did nothing, still dropping! But ..."


def test_most_recent_link_gives_tags_and_links(reader):
    orders = set()
    for split in ("train", "dev", "test"):
        path = THREADS / f"{split}.jsonl"
        for instance, thread in zip(reader.read(path), _raw_threads(path)):
            for t, post in enumerate(thread["posts"]):
                latest = max(post["links"])
                assert instance["links"].tensor[t].item() == latest
                assert instance["tags"].labels[t] == post["dialogue_acts"][post["links"].index(latest)]
                if len(post["links"]) > 1:
                    orders.add(post["links"].index(latest) == 0)
            assert instance["metadata"]["gold_links"] == [post["links"] for post in thread["posts"]]
            assert instance["metadata"]["gold_dialogue_acts"] == [post["dialogue_acts"] for post in thread["posts"]]
    assert orders == {True, False}  # multi-link posts with the latest link first and last


def test_initiator_given_or_derived(reader, train):
    raw = _raw_threads(TRAIN)
    assert any("initiator" in thread["posts"][0] for thread in raw)
    assert any("initiator" not in thread["posts"][0] for thread in raw)
    for instance, thread in zip(train, raw):
        first = thread["posts"][0]["author"]
        expected = [float(post.get("initiator", post["author"] == first)) for post in thread["posts"]]
        assert instance["structural_features"].tensor[:, 0].tolist() == expected
    # A given initiator wins over the authors.
    posts = [
        {"title": "Q", "text": "Help?", "author": "ann", "initiator": False},
        {"title": "", "text": "Me again, under my other account.", "author": "ann_work", "initiator": True},
    ]
    instance = reader.text_to_instance(posts, "t1")
    assert instance["structural_features"].tensor[:, 0].tolist() == [0.0, 1.0]


def test_punctuation_counts():
    assert punctuation_counts("Why?!", "See https://a.example.com/x?y=1 and www.b.example.org.") == (1, 1, 2)
    assert punctuation_counts("", "Did you try HTTP://A.EXAMPLE.COM/fix? Or http://?") == (2, 0, 1)
    assert punctuation_counts("", "") == (0, 0, 0)


# --------------------------------------------------------------------------------------------------
# Batching


def test_batches_pad_posts_and_words(train):
    vocab = Vocabulary.from_instances(train)
    first, other = train[0], next(i for i in train if i["metadata"]["num_posts"] not in (5,))
    sizes = [first["metadata"]["num_posts"], other["metadata"]["num_posts"]]
    most = max(sizes)
    title_lengths = [[len(field) for field in instance["titles"]] for instance in (first, other)]
    text_lengths = [[len(field) for field in instance["texts"]] for instance in (first, other)]
    assert len({length for lengths in text_lengths for length in lengths}) > 1

    batch = Batch([first, other])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()

    titles = tensors["titles"]["tokens"]["tokens"]
    texts = tensors["texts"]["tokens"]["tokens"]
    assert titles.shape == (2, most, max(map(max, title_lengths)))
    assert texts.shape == (2, most, max(map(max, text_lengths)))
    for b, (size, title_length, text_length) in enumerate(zip(sizes, title_lengths, text_lengths)):
        title_mask = util.get_text_field_mask(tensors["titles"], num_wrapping_dims=1)[b]
        text_mask = util.get_text_field_mask(tensors["texts"], num_wrapping_dims=1)[b]
        assert title_mask.sum(-1).tolist() == title_length + [0] * (most - size)
        assert text_mask.sum(-1).tolist() == text_length + [0] * (most - size)
    assert tensors["structural_features"].shape == (2, most, 2)
    assert tensors["structural_features"].dtype == torch.float32
    assert tensors["punctuation_features"].shape == (2, most, 3)
    short = sizes.index(min(sizes))
    assert tensors["structural_features"][short, min(sizes) :].eq(0).all()
    assert tensors["links"].dtype == torch.long
    assert tensors["links"][short, min(sizes) :].eq(-1).all()
    assert tensors["links"][0, :5].tolist() == [0, 1, 1, 3, 4]
    assert tensors["tags"].shape == (2, most)
    labels = [vocab.get_token_from_index(i, "labels") for i in tensors["tags"][0, :5].tolist()]
    assert labels == first["tags"].labels
    assert [metadata["thread_id"] for metadata in tensors["metadata"]] == ["train-01", other["metadata"]["thread_id"]]


# --------------------------------------------------------------------------------------------------
# Validation


def _thread(posts=None, **changes):
    thread = {
        "thread_id": "bad",
        "posts": posts
        if posts is not None
        else [
            {"title": "Q", "text": "Why?", "author": "ann", "links": [0], "dialogue_acts": ["Question-Question"]},
            {"title": "Re: Q", "text": "Because.", "author": "bob", "links": [1], "dialogue_acts": ["Answer-Answer"]},
            {"title": "", "text": "Thanks!", "author": "ann", "links": [2], "dialogue_acts": ["Resolution"]},
        ],
    }
    thread.update(changes)
    return thread


def _post_change(index, **changes):
    thread = _thread()
    post = thread["posts"][index]
    for key, value in changes.items():
        if value is _DROP:
            post.pop(key)
        else:
            post[key] = value
    return json.dumps(thread)


_DROP = object()

BAD_THREADS = [
    ('{"thread_id": "bad", "posts": [', ": invalid JSON"),
    ("[1, 2]", ": expected a JSON object with 'posts', got list"),
    (json.dumps({"thread_id": "bad"}), ": thread bad: the thread has no 'posts'"),
    (json.dumps(_thread(posts=[])), ": thread bad: 'posts' is empty"),
    (json.dumps(_thread(posts={"title": "Q"})), ": thread bad: 'posts' must be a list"),
    (json.dumps(_thread(thread_id=17)), ": 'thread_id' must be a string, got 17"),
    (
        json.dumps(_thread(posts=_thread()["posts"][:1] + ["Re: Q"])),
        ": thread bad, post 2: a post must be a JSON object",
    ),
    (_post_change(1, title=3), ": thread bad, post 2: 'title' must be a string, got int"),
    (_post_change(0, text=_DROP), ": thread bad, post 1: missing 'text'"),
    (_post_change(1, author=5), ": thread bad, post 2: 'author' must be a string"),
    (_post_change(1, initiator="yes"), ": thread bad, post 2: 'initiator' must be true or false"),
    (_post_change(1, links=[2]), ": thread bad, post 2: link 2 is out of range: post 2 may link to 0 (head) .. 1"),
    (_post_change(2, links=[-1]), ": thread bad, post 3: link -1 is out of range"),
    (_post_change(0, links=[1]), ": thread bad, post 1: link 1 is out of range"),
    (_post_change(1, links=["1"]), ": thread bad, post 2: 'links' must be a list of integers"),
    (_post_change(1, links=[True]), ": thread bad, post 2: 'links' must be a list of integers"),
    (_post_change(1, links=1), ": thread bad, post 2: 'links' must be a list of integers"),
    (_post_change(1, links=[], dialogue_acts=[]), ": thread bad, post 2: 'links' is empty"),
    (_post_change(2, links=[1, 1], dialogue_acts=["Answer-Add", "Other"]), ": thread bad, post 3: duplicate link"),
    (_post_change(2, links=[1, 2]), ": thread bad, post 3: 2 links but 1 dialogue acts"),
    (_post_change(1, dialogue_acts=[""]), ": thread bad, post 2: 'dialogue_acts' must be a list of non-empty strings"),
    (_post_change(1, dialogue_acts="Answer-Answer"), ": thread bad, post 2: 'dialogue_acts' must be a list"),
    (_post_change(1, dialogue_acts=_DROP), ": thread bad, post 2: has 'links' but no 'dialogue_acts'"),
    (
        _post_change(2, links=_DROP, dialogue_acts=_DROP),
        ": thread bad, post 3: has no 'links'/'dialogue_acts' but post 1 is labelled",
    ),
    (
        json.dumps(_unlabelled(_thread()) | {"posts": _unlabelled(_thread())["posts"][:2] + _thread()["posts"][2:]}),
        ": thread bad, post 3: has 'links'/'dialogue_acts' but post 1 is not labelled",
    ),
    (_post_change(1, author=_DROP), ": thread bad, post 2: no 'initiator' and no 'author'"),
    (_post_change(0, author=_DROP), ": thread bad, post 1: no 'initiator', and post 1 has no 'author'"),
]


@pytest.mark.parametrize("line, message", BAD_THREADS, ids=[message for _, message in BAD_THREADS])
def test_validation_errors_name_file_and_line(reader, tmp_path, line, message):
    good = json.dumps(_thread(thread_id="good"))
    path = _write_lines(tmp_path, [good, "", line, good])
    read = []
    with pytest.raises(ThreadFormatError) as error:
        for instance in reader.read(path):
            read.append(instance)
    assert isinstance(error.value, ConfigurationError)
    assert str(error.value).startswith(f"{path}:3: ")
    assert message in str(error.value)
    assert len(read) == 1  # the good thread on line 1; blank lines are skipped


def test_invalid_link_fixture(reader):
    message = r"invalid_link\.jsonl:2: thread bad-01, post 3: link 3 is out of range"
    with pytest.raises(ThreadFormatError, match=message):
        list(reader.read(THREADS / "invalid_link.jsonl"))


def test_empty_title_and_text_are_fine_and_empty_files_are_not(reader, tmp_path):
    posts = [{"title": "", "text": " \n ", "author": "ann", "links": [0], "dialogue_acts": ["Other"]}]
    instance = reader.text_to_instance(posts, "t")
    assert [token.text for token in instance["titles"][0].tokens] == [EMPTY_POST_TOKEN]
    assert [token.text for token in instance["texts"][0].tokens] == [EMPTY_POST_TOKEN]
    assert instance["metadata"]["words"] == [EMPTY_POST_TOKEN]
    with pytest.raises(ThreadFormatError, match="holds no threads"):
        list(reader.read(_write_lines(tmp_path, ["", "  "])))
    bad_utf8 = tmp_path / "latin1.jsonl"
    bad_utf8.write_bytes(json.dumps(_thread()).encode() + b"\n" + '{"x": "caf\xe9"}'.encode("latin-1") + b"\n")
    with pytest.raises(ThreadFormatError, match=r"latin1\.jsonl:2: not valid UTF-8"):
        list(reader.read(bad_utf8))


def test_text_to_instance_errors_without_a_file(reader):
    posts = _thread()["posts"]
    posts[1]["links"] = [5]
    with pytest.raises(ThreadFormatError, match=r"^<input>: thread t9, post 2: link 5 is out of range"):
        reader.text_to_instance(posts, "t9")
    with pytest.raises(ThreadFormatError, match=r"^x.jsonl:4: post 2: link 5"):
        reader.text_to_instance(posts, metadata={"source": "x.jsonl:4"})


# --------------------------------------------------------------------------------------------------
# Unlabelled threads, text_to_instance, options


def test_unlabelled_threads_have_no_tags_or_links(reader, tmp_path):
    thread = _unlabelled(_hand_thread())
    thread["posts"][3]["links"] = None  # null is the same as absent
    thread["posts"][3]["dialogue_acts"] = None
    for instance in (
        list(reader.read(_write_lines(tmp_path, [json.dumps(thread)])))[0],
        reader.text_to_instance(thread["posts"], thread["thread_id"]),
    ):
        assert "tags" not in instance.fields and "links" not in instance.fields
        assert "gold_links" not in instance["metadata"] and "gold_dialogue_acts" not in instance["metadata"]
        assert instance["structural_features"].tensor[:, 0].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0]
    reader.apply_token_indexers(instance)
    batch = Batch([instance])
    batch.index_instances(Vocabulary.from_instances([instance]))
    assert set(batch.as_tensor_dict()) == {"titles", "texts", "structural_features", "punctuation_features", "metadata"}


def test_text_to_instance_on_a_json_thread(reader, train):
    thread = _hand_thread()
    instance = reader.text_to_instance(thread["posts"], thread["thread_id"])
    read = train[0]
    assert instance["tags"].labels == read["tags"].labels
    assert torch.equal(instance["links"].tensor, read["links"].tensor)
    assert torch.equal(instance["structural_features"].tensor, read["structural_features"].tensor)
    assert torch.equal(instance["punctuation_features"].tensor, read["punctuation_features"].tensor)
    assert instance["metadata"]["source"] is None
    assert {k: v for k, v in instance["metadata"].metadata.items() if k != "source"} == {
        k: v for k, v in read["metadata"].metadata.items() if k != "source"
    }
    assert instance["titles"][0]._token_indexers is None  # set by apply_token_indexers, as in predictors
    reader.apply_token_indexers(instance)
    assert all(field.token_indexers is reader._token_indexers for field in instance["texts"])
    instance.index_fields(Vocabulary.from_instances(train))
    assert instance.as_tensor_dict()["texts"]["tokens"]["tokens"].shape[0] == 5


def test_default_tokenizer_is_offline_spacy(reader):
    assert isinstance(reader._tokenizer, SpacyTokenizer)
    assert reader._tokenizer.spacy.pipe_names == []
    tokens = [token.text for token in reader._tokenizer.tokenize("It can't boot!! See www.a.example.org.")]
    assert tokens == ["It", "ca", "n't", "boot", "!", "!", "See", "www.a.example.org", "."]
    instance = reader.text_to_instance([{"title": "Two\n\n  lines", "text": "x", "initiator": True}])
    assert [token.text for token in instance["titles"][0].tokens] == ["Two", "lines"]


def test_truncation_label_namespace_and_params(train):
    reader = DatasetReader.from_params(
        Params(
            {"type": "thread_discourse", "max_title_tokens": 2, "max_text_tokens": 3, "label_namespace": "da_labels"}
        )
    )
    assert isinstance(reader, ThreadDiscourseReader)
    instances = list(reader.read(TRAIN))
    assert max(len(field) for instance in instances for field in instance["titles"]) == 2
    assert max(len(field) for instance in instances for field in instance["texts"]) == 3
    assert [token.text for token in instances[0]["texts"][0].tokens] == ["Since", "I", "replaced"]
    vocab = Vocabulary.from_instances(instances)
    assert vocab.get_vocab_size("da_labels") == len({tag for i in train for tag in i["tags"].labels})
    with pytest.raises(ConfigurationError):
        ThreadDiscourseReader(max_text_tokens=0)


def test_worker_sharding_splits_the_threads():
    ids = []
    for worker in range(2):
        reader = ThreadDiscourseReader()
        reader._set_worker_info(WorkerInfo(2, worker))
        ids.append([instance["metadata"]["thread_id"] for instance in reader.read(TRAIN)])
    everything = [thread["thread_id"] for thread in _raw_threads(TRAIN)]
    assert ids[0] == everything[0::2] and ids[1] == everything[1::2]
