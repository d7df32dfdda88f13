"""
The page in a real headless browser: Playwright drives the system Chromium (Debian's `chromium`;
Playwright's own browser download is not used) against the app served on localhost.  Without
Chromium these tests skip and say why; with NERZOO_REQUIRE_BROWSER=1 (CI) they fail instead.
"""

import os
import shutil

import httpx
import pytest

from tests.server.conftest import MAX_CHARS

pytestmark = pytest.mark.xdist_group("server")

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # as root (CI), Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # No connections of its own: this machine's closed network refuses them, many at a time.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TEXT = "Anna Keller of Norvik Bank visited Oslo on Monday . Peter Blackburn met Tomas Varga in Brussels ."


def find_chromium():
    """The system Chromium: NERZOO_CHROMIUM, else `chromium` (Debian), `chromium-browser` or `google-chrome`."""
    candidates = [os.environ.get("NERZOO_CHROMIUM")] + [
        shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
    ]
    return next((path for path in candidates if path and os.path.exists(path)), None)


NO_BROWSER = "the page's browser tests need Chromium: `apt-get install chromium` (or set NERZOO_CHROMIUM)"


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    if executable is None:
        if os.environ.get("NERZOO_REQUIRE_BROWSER") == "1":
            pytest.fail(f"NERZOO_REQUIRE_BROWSER=1 but {NO_BROWSER}")
        pytest.skip(NO_BROWSER)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    # The page's own policy (Content-Security-Policy) must allow everything it does.
    page.on(
        "console",
        lambda message: "Content Security Policy" in message.text and problems.append(f"console: {message.text}"),
    )
    page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.goto(live_server)
    page.wait_for_selector("#model-a option", state="attached")
    yield page
    context.close()
    assert not problems


def tag(page, text, model="bilstm_crf", beside=None, mode=None):
    page.fill("#text", text)
    page.select_option("#model-a", model)
    if beside:
        page.check("#compare")
        page.select_option("#model-b", beside)
    if mode:
        page.select_option("#mode", mode)
    answered = int(page.get_attribute("#results", "data-answered") or 0)
    page.click("#tag")
    page.wait_for_selector(f'#results[data-answered="{answered + 1}"]', state="attached")


def api(live_server, model, body):
    return httpx.post(f"{live_server}/api/models/{model}/predict", json=body).json()


def marks(page, model):
    return page.locator(f'section.column[data-model="{model}"] mark.entity').evaluate_all(
        """marks => marks.map(mark => ({
            label: mark.dataset.label, char_start: Number(mark.dataset.charStart),
            char_end: Number(mark.dataset.charEnd), confidence: Number(mark.dataset.confidence),
            text: mark.querySelector('.entity-text').textContent,
            hidden: mark.classList.contains('below-threshold')}))"""
    )


def test_typed_text_shows_the_apis_spans_with_labels_and_offsets(page, live_server):
    tag(page, TEXT)
    expected = api(live_server, "bilstm_crf", {"sentence": TEXT})["spans"]
    assert expected, "the fixtures model finds entities in this text"
    shown = marks(page, "bilstm_crf")
    assert [(m["label"], m["char_start"], m["char_end"], m["text"]) for m in shown] == [
        (s["label"], s["char_start"], s["char_end"], TEXT[s["char_start"] : s["char_end"]]) for s in expected
    ]
    assert [m["confidence"] for m in shown] == [s["confidence"] for s in expected]
    column = page.locator('section.column[data-model="bilstm_crf"]')
    assert column.locator(".document").inner_text().replace("\n", "").startswith("Anna Keller")
    # The tokens' tags and confidences, on demand.
    column.locator("details.tokens summary").click()
    rows = column.locator("details.tokens tr[data-token-index]")
    assert rows.count() == len(api(live_server, "bilstm_crf", {"sentence": TEXT})["tokens"])
    assert rows.first.is_visible()


def test_the_slider_hides_spans_below_it(page, live_server):
    tag(page, TEXT)
    confidences = sorted(m["confidence"] for m in marks(page, "bilstm_crf"))
    threshold = round((confidences[0] + confidences[-1]) / 2, 2) if confidences[0] < confidences[-1] else 0.5
    page.locator("#threshold").fill(str(threshold))
    shown = marks(page, "bilstm_crf")
    assert [m["hidden"] for m in shown] == [m["confidence"] < threshold for m in shown]
    assert page.locator("#threshold-value").inner_text() == f"{threshold:.2f}"
    page.locator("#threshold").fill("1")
    assert all(m["hidden"] or m["confidence"] >= 1 for m in marks(page, "bilstm_crf"))
    hidden_label = page.locator("mark.entity.below-threshold .entity-label").first
    assert not hidden_label.is_visible()


def test_a_tree_model_shows_its_tree_and_attention(page, live_server):
    sentence = "Anna Keller visited Oslo ."
    tag(page, sentence, model="deptree_ner")
    result = api(live_server, "deptree_ner", {"sentence": sentence})
    column = page.locator('section.column[data-model="deptree_ner"]')
    arcs = column.locator(".tree svg g.arc")
    assert arcs.count() == len(result["tokens"])
    assert column.locator(".tree svg").is_visible()
    heads = [int(arcs.nth(index).get_attribute("data-head")) for index in range(arcs.count())]
    assert heads == result["parse"]["head_indices"]
    relative = column.locator('svg[data-kind="relative_attention"] rect.cell')
    assert relative.count() == len(result["tokens"]) ** 2
    assert column.locator('svg[data-kind="global_attention"] rect.cell').count() == len(result["tokens"])


def test_memory_hops_and_sentences_of_a_document(page, live_server):
    document = "Anna Keller visited Oslo. Then Peter Blackburn met Tomas Varga in Brussels."
    tag(page, document, model="me_crf")
    assert page.locator("#mode").input_value() == "document"  # me_crf reads documents
    result = api(live_server, "me_crf", {"document": document})
    column = page.locator('section.column[data-model="me_crf"]')
    sentences = column.locator(".sentence")
    offsets = result["token_offsets"]
    assert [
        (int(sentences.nth(i).get_attribute("data-char-start")), int(sentences.nth(i).get_attribute("data-char-end")))
        for i in range(sentences.count())
    ] == [(offsets[start][0], offsets[end - 1][1]) for start, end in result["sentences"]]
    assert column.locator('svg[data-kind="memory_attention-hop-1"]').is_visible()


def test_two_models_side_by_side(page):
    tag(page, TEXT, model="bilstm_crf", beside="deptree_ner")
    columns = page.locator("section.column")
    assert [columns.nth(i).get_attribute("data-model") for i in range(columns.count())] == ["bilstm_crf", "deptree_ner"]
    first, second = columns.nth(0).bounding_box(), columns.nth(1).bounding_box()
    assert second["x"] > first["x"] + first["width"] - 1 and abs(second["y"] - first["y"]) < 1
    if os.environ.get("NERZOO_SCREENSHOT"):
        page.screenshot(path=os.environ["NERZOO_SCREENSHOT"], full_page=True)


def test_empty_or_long_input_shows_the_apis_error(page):
    tag(page, "   ")
    error = page.locator("#error")
    assert error.is_visible() and '"sentence" is empty' in error.inner_text()
    assert page.locator("section.column").count() == 0
    tag(page, "x" * (MAX_CHARS + 1))
    assert error.is_visible() and f"the limit is {MAX_CHARS}" in error.inner_text()
    assert page.locator("#limit").inner_text() == f"up to {MAX_CHARS} characters"
    tag(page, TEXT)  # and the page goes on
    assert not error.is_visible() and page.locator("section.column").count() == 1


def test_markup_in_the_text_renders_literally(page, live_server):
    text = "Anna met <img src=x onerror=alert(1)> and <b>Oslo</b> <script>alert(2)</script> ."
    tag(page, text, model="deptree_ner")
    results = page.locator("#results")
    assert results.locator("img, b, script").count() == 0
    # The text as shown, without the entity badges the model's spans add inside it.
    shown = results.locator(".document").evaluate(
        "node => { const copy = node.cloneNode(true); copy.querySelectorAll('.entity-label').forEach((label) => "
        "label.remove()); return copy.textContent; }"
    )
    assert "<img src=x onerror=alert(1)>" in shown and "<script>alert(2)</script>" in shown
    tokens = api(live_server, "deptree_ner", {"sentence": text})["tokens"]
    tree_tokens = results.locator(".tree svg text.tree-token").all_text_contents()
    assert tree_tokens == tokens
