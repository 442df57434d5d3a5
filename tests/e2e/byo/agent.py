"""A tiny Python agent: asks the model through the flock's gateway with only
the standard library, the way an SDK does (ANTHROPIC_BASE_URL, a dummy key),
prints the answer and writes it to answer.md in its working directory."""
import json
import os
import sys
import urllib.request

base = os.environ["ANTHROPIC_BASE_URL"]
prompt = " ".join(sys.argv[1:]) or "hello"
req = urllib.request.Request(
    base + "/v1/messages",
    data=json.dumps({
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": prompt}],
    }).encode(),
    headers={
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": os.environ.get("ANTHROPIC_API_KEY", "unused-the-gateway-holds-the-key"),
    },
)
with urllib.request.urlopen(req, timeout=30) as resp:
    answer = "".join(b.get("text", "") for b in json.load(resp)["content"])
with open("answer.md", "w") as f:
    f.write(answer + "\n")
print(answer)
