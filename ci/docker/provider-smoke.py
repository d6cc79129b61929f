"""Inside the image: every provider dream-memory names still loads in the slimmed venv.

Run by container-proof.sh as `python3 /smoke.py API_BASE`. For each provider in
dream_memory.settings.PROVIDER_KEY_ENV, one litellm.completion against the scripted server on
127.0.0.1: OpenAI-compatible providers get an answer (and a cost lookup); the others reach the
server with their own wire format and get its HTTP error. Either shows the provider's code path
imported and ran; an ImportError (a dependency the slimming removed) fails the proof.
"""

from __future__ import annotations

import sys

import litellm  # noqa: TID251 (a proof of litellm itself, run inside the image)

from dream_memory.settings import PROVIDER_KEY_ENV

api_base = sys.argv[1]
litellm.suppress_debug_info = True
failed = []
for provider in PROVIDER_KEY_ENV:
    model = f"{provider}/smoke-model"
    try:
        response = litellm.completion(
            model=model,
            api_base=api_base,
            api_key="dummy",
            messages=[{"role": "user", "content": "Reply with one word."}],
            max_tokens=8,
            num_retries=0,
            timeout=20,
        )
        try:
            litellm.completion_cost(completion_response=response, model=model)
        except Exception as exc:  # no price for a made-up model is fine; an import error is not
            if isinstance(exc, ImportError):
                raise
        outcome = "answered"
    except ImportError as exc:
        failed.append(provider)
        outcome = f"IMPORT ERROR {exc}"
    except Exception as exc:
        chain, cause = [], exc
        while cause is not None:
            chain.append(cause)
            cause = cause.__cause__ or cause.__context__
        if any(isinstance(c, ImportError) for c in chain):
            failed.append(provider)
            outcome = f"IMPORT ERROR {exc}"
        else:
            outcome = f"reached the server, {type(exc).__name__} (status {getattr(exc, 'status_code', '?')})"
    print(f"  {provider}: {outcome}")
if failed:
    print(f"providers that no longer load: {', '.join(failed)}")
    sys.exit(1)
