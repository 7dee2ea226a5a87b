"""Every lookup has one deadline: connect and the whole answer, however slowly it comes.

Servers on 127.0.0.1 that trickle the body, trickle the headers (one byte every
0.5 s) or say nothing; the lookup gives up at its deadline and says the
provider gave no answer yet. Only "well within" bounds are asserted.
"""

from __future__ import annotations

import time

import pytest

from console.core.asking import FAILED
from console.transports.lookup_core import ProviderLookup
from console.transports.postmark_lookup import PostmarkLookupApi
from console.transports.sendgrid_lookup import SendGridLookupApi
from tests.support import slow_provider
from tests.support.lookup_questions import question_about

DEADLINE_SECONDS = 1.0
WELL_WITHIN_SECONDS = 15.0
QUESTION = question_about()
SERVERS = {
    "trickling body": slow_provider.trickling_body,
    "trickling headers": slow_provider.trickling_headers,
    "silent": slow_provider.silent,
}


@pytest.fixture(params=list(SERVERS))
def slow_server(request):
    server = SERVERS[request.param]()
    yield server
    server.close()


@pytest.mark.parametrize(
    "api_for",
    [lambda url: PostmarkLookupApi(url, "token"), lambda url: SendGridLookupApi(url, "SG.key")],
    ids=["postmark", "sendgrid"],
)
def test_a_slow_provider_is_given_up_at_the_deadline(slow_server, api_for):
    lookup = ProviderLookup(api_for(slow_server.base_url), timeout_seconds=DEADLINE_SECONDS)
    started = time.monotonic()
    try:
        finding = lookup.ask(QUESTION)
    finally:
        lookup.close()
    assert time.monotonic() - started < WELL_WITHIN_SECONDS
    assert finding.said == FAILED and finding.unanswered
    assert "no answer" in finding.detail
