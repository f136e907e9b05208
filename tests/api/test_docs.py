"""/docs and /redoc work offline: every script, stylesheet and icon they load comes from this
server (shipped in a Python package), none from a CDN."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from tests.conftest import Api, scrape


class Assets(HTMLParser):
    """The URLs a page loads: script src, link href (stylesheets, icons), redoc spec-url."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name in ("src", "href", "spec-url"):
            if found.get(name):
                self.urls.append(str(found[name]))


def assets(html: str) -> list[str]:
    parser = Assets()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_documentation_pages_load_everything_from_this_server(api: Api, page: str) -> None:
    with httpx.Client(base_url=api.url) as client:
        html = client.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assert "cdn." not in html.text and "https://" not in html.text
        urls = assets(html.text)
        assert any(u.endswith(".js") for u in urls), urls
        for url in urls:
            absolute = urljoin(f"{api.url}{page}", url)
            assert urlsplit(absolute).netloc == urlsplit(api.url).netloc, url
            answer = client.get(absolute)
            assert answer.status_code == 200, url
            assert len(answer.content) > 1000, url


def test_the_swagger_ui_script_and_stylesheet_are_the_real_ones(api: Api) -> None:
    with httpx.Client(base_url=api.url) as client:
        urls = assets(client.get("/docs").text)
        [script] = [u for u in urls if u.endswith(".js")]
        [style] = [u for u in urls if u.endswith(".css")]
        js, css = client.get(script), client.get(style)
    assert "javascript" in js.headers["content-type"] and "SwaggerUIBundle" in js.text
    assert css.headers["content-type"].startswith("text/css") and ".swagger-ui" in css.text


def test_asset_requests_are_counted_under_their_mount(api: Api) -> None:
    with httpx.Client(base_url=api.url) as client:
        [style] = [u for u in assets(client.get("/docs").text) if u.endswith(".css")]
        client.get(style)
        client.get("/no-such-page")
        metrics = scrape(client).text
    mount = style.rsplit("/", 1)[0]
    assert f'route="{mount}",status="200"' in metrics
    assert 'route="unmatched",status="404"' in metrics
