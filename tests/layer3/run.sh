#!/usr/bin/env bash
# Layer 3 of the testing layers: the real Pulumi CLI and the real docker and
# command provider plugins, on a clean clone of HEAD, doing exactly what the
# README tells a new user, then checking what they created:
#   1. make deploy                       (all agents healthy: timed from the start)
#   2. make flock-test, make flock-watch (briefly), make flock-plan (a plan
#      of commands on the board, to done), make flock-board, make flock-logs
#   3. the isolation probes of tests/e2e against the deployed flock
#   4. pulumi preview --expect-no-changes (no churn)
#   5. one agent more: the plan creates only its resources, pulumi up keeps
#      the bus's and every other agent's container, and the preview after is clean
#   6. the model gateway: flock:gateway with its key as a secret and a daily
#      budget, pulumi up,
#      a task running the example AI agent gets a fake model's answer through
#      it, the fake saw the key no agent holds, make flock-budget shows its
#      spend, the same after docker restart of the gateway, a plan with one
#      AI step runs to done on the board, and the preview after is clean
#   6b. the way out: an egress rule for a git host on "the internet" (a
#      fixture with a test CA of its own, on a network only the gateway
#      joins), the agents on a Debian image with git: agent-1's git clone
#      goes through the gateway, which puts in the credential no agent
#      holds; its push, which the rule does not allow, is refused; the
#      preview after is clean
#   7. make preview with the policy pack: clean (the rule's extra roots named
#      as advisory), then blocking a container made writable
#   8. make destroy: nothing of the flock left on the engine, no key on the host
# Every step prints its time; a table of them closes the run.
#
# FLOCK_LAYER3_AGENTS=N deploys N agents instead of Pulumi.dev.yaml's count.
# FLOCK_LAYER3_BUS_REPLICAS=3 deploys the three-node bus (flock:bus.replicas);
#   the e2e probes of step 3 are then left out: they probe one bus container
#   (tests/e2e/cluster proves the cluster on a replay, make e2e-cluster).
# FLOCK_LAYER3_KEEP=1 leaves the work directory (clone, logs, backend) behind.
# Needs root on the Docker host (the flock's host steps) and the toolchain:
# `pulumi` on PATH with the docker 4.10.0 and command 1.2.0 plugins installed
# (the README's "Running it for real" says how to build them).
set -euo pipefail

# Everything runs inside main, and the script exits on the line that calls it:
# bash reads the whole function before it starts and never reads past that
# line, so editing the checkout while a run goes on cannot break it.
main() {

die() { echo "layer3: $*" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
src=$(git -C "$here" rev-parse --show-toplevel)
export PATH="/usr/local/go/bin:$PATH"

command -v pulumi >/dev/null || die "no pulumi CLI on PATH"
plugins=$(pulumi plugin ls 2>/dev/null)
grep -Eq '^docker +resource +4\.10\.0' <<<"$plugins" || die "the docker 4.10.0 provider plugin is not installed (pulumi plugin ls)"
grep -Eq '^command +resource +1\.2\.0' <<<"$plugins" || die "the command 1.2.0 provider plugin is not installed (pulumi plugin ls)"
[ "$(id -u)" -eq 0 ] || die "run as root: the flock's host steps create directories owned by the agents' UIDs"
docker info >/dev/null 2>&1 || die "no Docker engine answers"
if [ -n "$(docker ps -aq --filter label=ai-flock.flock)" ]; then
  die "a flock already runs on this engine (docker ps --filter label=ai-flock.flock): destroy it first"
fi
[ -z "$(git -C "$src" status --porcelain)" ] || echo "layer3: note: uncommitted changes are not part of the clone of HEAD" >&2

work=$(mktemp -d /tmp/flock-layer3.XXXXXX)
chmod 0755 "$work"
repo=$work/ai-flock
logs=$work/logs
mkdir -p "$logs"
git clone -q "$src" "$repo"
cd "$repo"
echo "layer3: clone of $(git rev-parse --short HEAD) in $repo; logs in $logs"

# A backend, passphrase and operator key of its own: nothing of a user's is touched.
export PULUMI_BACKEND_URL="file://$work/backend"
PULUMI_CONFIG_PASSPHRASE="layer3-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
export PULUMI_CONFIG_PASSPHRASE
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_SKIP_UPDATE_CHECK=true
export OPERATOR_KEY="$work/operator.nk"
mkdir -p "$work/backend"

stack=dev
flock=flock
count=$(sed -n 's/^  flock:agentCount: *\([0-9]*\).*/\1/p' Pulumi.dev.yaml)
if [ -n "${FLOCK_LAYER3_AGENTS:-}" ]; then
  count=$FLOCK_LAYER3_AGENTS
  sed -i "s/^  flock:agentCount: .*/  flock:agentCount: $count/" Pulumi.dev.yaml
fi
replicas=${FLOCK_LAYER3_BUS_REPLICAS:-1}
case "$replicas" in
1) ;;
3) printf '  flock:bus:\n    replicas: 3\n' >>Pulumi.dev.yaml ;;
*) die "FLOCK_LAYER3_BUS_REPLICAS must be 1 or 3 (got $replicas)" ;;
esac
state_root=$(sed -n 's/^    stateRoot: *//p' Pulumi.dev.yaml)
# A destroy keeps the flock's data (the bus's store: streams, the board, the
# audit trail; the agents' directory images: their inboxes), and a deploy of
# the same flock takes it up again: a run checks its own trail and mail, so
# it starts with none and leaves none.
for d in bus disks; do
  [ -z "$(ls -A "$state_root/$d" 2>/dev/null)" ] || die "$state_root/$d holds a flock's data from before (a destroy keeps it): remove it, or move it aside, first"
done
# The bus containers: <flock>-bus, or <flock>-bus-1 … -3.
if [ "$replicas" = 1 ]; then first_bus=$flock-bus; else first_bus=$flock-bus-1; fi

declare -a table=()
now() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
record() { table+=("$(printf '%-58s %8s s' "$1" "$2")"); echo "   $1: $2 s"; }

# run NAME LOG CMD...: runs CMD with its output in LOG, fails the run on error.
run() {
  local name=$1 log=$logs/$2 t0
  shift 2
  echo "== $name"
  t0=$(now)
  if ! "$@" >"$log" 2>&1; then
    tail -40 "$log" >&2
    die "$name failed (full output: $log)"
  fi
  record "$name" "$(secs "$t0" "$(now)")"
}

deployed=0
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  local rc=$?
  if [ "$deployed" = 1 ] && [ "$rc" -ne 0 ]; then
    echo "layer3: failed; destroying what was deployed (logs kept in $logs)" >&2
    docker rm -f layer3-gitremote layer3-fake-model >/dev/null 2>&1 || true
    pulumi destroy --yes -s "$stack" >"$logs/cleanup-destroy.log" 2>&1 || echo "layer3: cleanup destroy failed: $logs/cleanup-destroy.log" >&2
    docker network rm layer3-internet >/dev/null 2>&1 || true
    rm -rf "$state_root/bus" "$state_root/disks" # this run's own: it refused to start with any there
    rm -f "$OPERATOR_KEY"
  fi
  if [ "$rc" -eq 0 ] && [ "${FLOCK_LAYER3_KEEP:-}" != 1 ]; then
    rm -rf "$work"
  fi
}
trap cleanup EXIT

# agents_healthy N: every one of N agents (and every bus node) reports healthy.
agents_healthy() {
  local n b
  n=$(docker ps --filter "label=ai-flock.flock=$flock" --filter label=ai-flock.role=agent --filter health=healthy -q | wc -l)
  b=$(docker ps --filter "label=ai-flock.flock=$flock" --filter label=ai-flock.role=bus --filter health=healthy -q | wc -l)
  [ "$n" -eq "$1" ] && [ "$b" -eq "$replicas" ]
}
wait_healthy() {
  local deadline=$((SECONDS + $2))
  until agents_healthy "$1"; do
    [ "$SECONDS" -lt "$deadline" ] || die "not every agent is healthy after $2 s: $(docker ps --filter "label=ai-flock.flock=$flock" --format '{{.Names}} {{.Status}}' | sort | tr '\n' ';')"
    sleep 0.2
  done
}
containers() { docker ps -a --filter "label=ai-flock.flock=$flock" --format '{{.Names}} {{.ID}}' | sort; }

# What the engine holds before: destroy must bring it back to exactly this
# (builds must not leave intermediate containers or images behind either).
engine_count() { echo "$(docker ps -aq | wc -l) containers, $(docker images -aq | wc -l) images, $(docker network ls -q | wc -l) networks"; }
# Step 6b's agents and git host start from the Debian root with git
# (tests/images): made before the engine is counted.
tools_image="flock-test/bookworm-tools:latest"
docker image inspect "$tools_image" >/dev/null 2>&1 || bash tests/images/debian-python.sh >"$logs/tools-image.log" 2>&1 ||
  die "could not make $tools_image ($logs/tools-image.log)"
engine_before=$(engine_count)

# 1. Deploy as the README says.
echo "== make deploy ($count agents)"
t0=$(now)
make --no-print-directory deploy >"$logs/deploy.log" 2>&1 || { deployed=1; tail -40 "$logs/deploy.log" >&2; die "make deploy failed"; }
deployed=1
t_up=$(now)
wait_healthy "$count" 180
t_healthy=$(now)
grep -E '^Compiled in|^ +[+~-] [0-9]+ (created|updated|deleted)|^Duration:' "$logs/deploy.log" | sed 's/^ */   /'
record "make deploy ($count agents), compile and pulumi up" "$(secs "$t0" "$t_up")"
record "make deploy start to every agent healthy" "$(secs "$t0" "$t_healthy")"
grep -q 'Resources:' "$logs/deploy.log" || die "no pulumi up in the make deploy output ($logs/deploy.log)"
[ -s "$OPERATOR_KEY" ] || die "make deploy wrote no operator key to $OPERATOR_KEY"

# 2. The operator commands of the README.
run "make flock-test" flock-test.log make --no-print-directory flock-test
ok=$(grep -c '\] ok' "$logs/flock-test.log" || true)
[ "$ok" -eq "$count" ] || { cat "$logs/flock-test.log" >&2; die "make flock-test: $ok of $count agents answered ok"; }
echo "   $ok of $count agents ran the task; one said: $(grep -v 'go run' "$logs/flock-test.log" | grep -m1 'hello from the operator' | sed 's/^ *//')"
echo "== make flock-watch (40 s)"
timeout -s INT 40 make --no-print-directory flock-watch >"$logs/flock-watch.log" 2>&1 || true
seen=$(grep -o 'heartbeat [a-z0-9-]*' "$logs/flock-watch.log" | sort -u | wc -l)
[ "$seen" -eq "$count" ] || { tail -20 "$logs/flock-watch.log" >&2; die "make flock-watch: heartbeats from $seen of $count agents in 40 s"; }
echo "   heartbeats from all $seen agents"
run "make flock-plan (examples/plans/hello.yaml on the board)" flock-plan.log make --no-print-directory flock-plan
grep -q 'plan hello: all 3 tasks done' "$logs/flock-plan.log" || { tail -20 "$logs/flock-plan.log" >&2; die "make flock-plan: the hello plan did not end done"; }
run "make flock-board" flock-board.log make --no-print-directory flock-board
[ "$(grep -c '^hello ' "$logs/flock-board.log" || true)" -eq 3 ] || { cat "$logs/flock-board.log" >&2; die "make flock-board does not list the hello plan's 3 tasks"; }
grep -q 'hello from the board' <(go run ./agent/cmd/flock-agent board show --nkey "$OPERATOR_KEY" hello report) ||
  die "the report task's context does not hold greet's result"
echo "   the hello plan ran to done on the agents; report saw greet's result in its context"
run "make flock-logs" flock-logs.log make --no-print-directory flock-logs
for c in "$first_bus" "$flock-agent-1" "$flock-agent-$count"; do
  grep -q "^== $c\$" "$logs/flock-logs.log" || die "make flock-logs shows nothing of $c"
done

# The dashboard and an agent's log lines, asked of the agents in their
# containers over the bus (one frame: no terminal here; tmux is the unit test's).
go run ./agent/cmd/flock-agent top --once --nkey "$OPERATOR_KEY" >"$logs/top.txt" 2>&1 || { cat "$logs/top.txt" >&2; die "flock-agent top --once failed"; }
rows=$(grep -cE '^  agent-[0-9]+ +ready ' "$logs/top.txt" || true)
[ "$rows" -eq "$count" ] || { cat "$logs/top.txt" >&2; die "flock-agent top shows $rows of $count agents ready"; }
go run ./agent/cmd/flock-agent logs agent-1 --nkey "$OPERATOR_KEY" >"$logs/logs-agent-1.txt" 2>&1 || { cat "$logs/logs-agent-1.txt" >&2; die "flock-agent logs agent-1 failed"; }
grep -q '"msg":"agent ready"' "$logs/logs-agent-1.txt" || grep -q '"agent":"agent-1"' "$logs/logs-agent-1.txt" ||
  { cat "$logs/logs-agent-1.txt" >&2; die "agent-1's log lines over the bus are not agent-1's"; }
! grep -q '"agent":"agent-2"' "$logs/logs-agent-1.txt" || die "agent-1's log lines hold agent-2's"
echo "   flock-agent top: $rows of $count agents ready; flock-agent logs agent-1: $(wc -l <"$logs/logs-agent-1.txt") lines from agent-1"

# The audit trail, written by the services in their container: the tasks
# the operator sent are in it, the board's changes too, and it verifies
# whole against the head its writer anchored.
go run ./agent/cmd/flock-agent audit --nkey "$OPERATOR_KEY" --kind task.sent >"$logs/audit-sent.jsonl" 2>&1 || { cat "$logs/audit-sent.jsonl" >&2; die "flock-agent audit failed"; }
sent=$(grep -c '"who":"operator","kind":"task.sent"' "$logs/audit-sent.jsonl" || true)
[ "$sent" -ge 1 ] || { cat "$logs/audit-sent.jsonl" >&2; die "the audit trail holds no task the operator sent"; }
go run ./agent/cmd/flock-agent audit --nkey "$OPERATOR_KEY" --kind board.change >"$logs/audit-board.jsonl" 2>&1 || die "flock-agent audit --kind board.change failed"
grep -q '"what":"hello/report","outcome":"done"' "$logs/audit-board.jsonl" || { tail -5 "$logs/audit-board.jsonl" >&2; die "the audit trail lacks the hello plan's report task done"; }
sleep 35 # one anchoring interval: the head is anchored
go run ./agent/cmd/flock-agent audit verify --nkey "$OPERATOR_KEY" >"$logs/audit-verify.txt" 2>&1 || { cat "$logs/audit-verify.txt" >&2; die "flock-agent audit verify failed"; }
grep -q 'checked against the head anchored' "$logs/audit-verify.txt" || { cat "$logs/audit-verify.txt" >&2; die "audit verify checked no anchored head"; }
echo "   audit: $sent tasks sent by the operator, the board's changes; $(head -1 "$logs/audit-verify.txt"), $(tail -1 "$logs/audit-verify.txt")"

# The metrics, as Prometheus would scrape them: the relay on the host's
# loopback, every agent up, agent-1's tasks counted.
curl -fsS "http://127.0.0.1:9464/metrics" >"$logs/metrics-1.txt" || die "no metrics on 127.0.0.1:9464/metrics"
up=$(grep -cE '^flock_agent_up\{agent="[^"]+"\} 1$' "$logs/metrics-1.txt" || true)
[ "$up" -eq "$count" ] || { grep '^flock_agent_up' "$logs/metrics-1.txt" >&2; die "the metrics say $up of $count agents are up"; }
grep -qE '^flock_tasks_total\{agent="agent-1",status="ok"\} [1-9]' "$logs/metrics-1.txt" ||
  { grep '^flock_tasks_total' "$logs/metrics-1.txt" >&2; die "the metrics count no task agent-1 ran"; }
echo "   127.0.0.1:9464/metrics: $up of $count agents up, agent-1's tasks counted ($(grep -c '^flock_' "$logs/metrics-1.txt") series)"

# 3. The isolation probes against what Pulumi created.
if [ "$replicas" = 1 ]; then
  echo "== isolation probes (tests/e2e against the deployed flock)"
  t0=$(now)
  if ! FLOCK_E2E=1 FLOCK_REQUIRE_DOCKER=1 FLOCK_E2E_TARGET=pulumi FLOCK_E2E_STACK=$stack \
    go test -count=1 -timeout 20m -v ./tests/e2e/ >"$logs/probes.log" 2>&1; then
    grep -E '^(--- FAIL|FAIL|panic)|_test.go:[0-9]+:' "$logs/probes.log" | head -40 >&2
    die "the probes failed against the deployed flock ($logs/probes.log)"
  fi
  echo "   $(grep -c '^--- PASS' "$logs/probes.log") passed, $(grep -c '^--- SKIP' "$logs/probes.log") skipped (they kill or restart containers: replay only)"
  record "isolation probes" "$(secs "$t0" "$(now)")"
else
  echo "== isolation probes: left out with $replicas bus nodes (make e2e-cluster proves the cluster)"
fi

# 4. No churn.
run "pulumi preview --expect-no-changes" preview-1.log pulumi preview --expect-no-changes -s "$stack"

# 5. One agent more: only its resources.
new="agent-$((count + 1))"
before=$(containers)
pulumi config set flock:agentCount "$((count + 1))" -s "$stack"
run "pulumi preview --json (one agent more)" plan.json pulumi preview --json -s "$stack"
echo "== the plan adds only $new's resources"
go run ./tests/layer3/plancheck "$flock" "$new" <"$logs/plan.json" || die "adding $new changes more than $new"
t0=$(now)
run "pulumi up (one agent more)" up-add.log pulumi up --yes -s "$stack"
wait_healthy "$((count + 1))" 120
record "pulumi up (one agent more) to it healthy" "$(secs "$t0" "$(now)")"
after=$(containers)
changed=$(comm -23 <(echo "$before") <(echo "$after"))
[ -z "$changed" ] || die "containers replaced by adding $new: $changed"
grep -q "^$flock-$new " <<<"$after" || die "$new has no container"
echo "   the bus and all $count agents kept their containers; $new is healthy"
run "make flock-test ($((count + 1)) agents)" flock-test-2.log make --no-print-directory flock-test
ok=$(grep -c '\] ok' "$logs/flock-test-2.log" || true)
[ "$ok" -eq "$((count + 1))" ] || die "make flock-test after adding $new: $ok of $((count + 1)) agents answered ok"
run "pulumi preview --expect-no-changes (after adding)" preview-2.log pulumi preview --expect-no-changes -s "$stack"

# 6. The model gateway, its upstream a fake model on the egress network (the
# pool's second-to-last subnet; the gateway is .246 there, the fake .245).
count=$((count + 1))
gw_key="sk-ant-layer3-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
fake_ip=10.210.255.245
answer="layer3: an answer through the gateway"
pulumi config set --path 'flock:gateway.upstreams.anthropic.url' "http://$fake_ip:9090" -s "$stack"
pulumi config set --secret flock:anthropicApiKey "$gw_key" -s "$stack"
pulumi config set --path 'flock:gateway.budgetTokens' 100000 -s "$stack"
pulumi config set --path 'flock:gateway.budgetWindow' day -s "$stack"
grep -q "$gw_key" Pulumi.dev.yaml && die "the gateway's key is in Pulumi.dev.yaml in plain text"
common=$(sed -n 's/^    root: *//p' Pulumi.dev.yaml)/common
run "build the example AI agent and the fake model" build-ai.log bash -c "
  CGO_ENABLED=0 go build -o '$common/bin/ai-agent' ./examples/ai-agent &&
  mkdir -p '$work/fake' && CGO_ENABLED=0 go build -o '$work/fake/fake-model' ./tests/fakemodel/cmd/fake-model &&
  printf 'FROM scratch\nCOPY fake-model /fake-model\nENTRYPOINT [\"/fake-model\"]\n' >'$work/fake/Dockerfile' &&
  docker build -q -t ai-flock-layer3/fake-model:latest '$work/fake'"
t0=$(now)
run "pulumi up (with the gateway)" up-gateway.log pulumi up --yes -s "$stack"
wait_healthy "$count" 120
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$flock-gateway" 2>/dev/null)" = healthy ]; do
  [ "$(secs "$t0" "$(now)" | cut -d. -f1)" -lt 180 ] || die "the gateway is not healthy: $(docker ps -a --filter name="$flock-gateway" --format '{{.Status}}')"
  sleep 0.5
done
record "pulumi up (with the gateway) to it and every agent healthy" "$(secs "$t0" "$(now)")"
docker run -d --name layer3-fake-model --network "$flock-egress" --ip "$fake_ip" --read-only --cap-drop ALL --user 65534:65534 \
  -e FAKE_MODEL_KEY="$gw_key" -e FAKE_MODEL_ANSWER="$answer" ai-flock-layer3/fake-model:latest >/dev/null
run "a task runs the example AI agent through the gateway" ask.log \
  go run ./agent/cmd/flock-agent task --nkey "$OPERATOR_KEY" --agent agent-1 -- /shared/common/bin/ai-agent ask What is a flock?
grep -q "$answer" "$logs/ask.log" || { cat "$logs/ask.log" >&2; die "agent-1 did not get the fake model's answer through the gateway"; }
seen=$(curl -fsS "http://$fake_ip:9090/_fake/seen") || die "the fake model does not answer on the egress network"
grep -q "$gw_key" <<<"$seen" || die "the fake model never saw the gateway's key: $seen"
for c in $(docker ps -q --filter "label=ai-flock.flock=$flock" --filter label=ai-flock.role=agent); do
  docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$c" | grep -q "$gw_key" && die "an agent's environment holds the key"
done
echo "   agent-1: \"$(grep -m1 -o "$answer" "$logs/ask.log")\"; the fake saw the gateway's key; no agent holds it"
# The spend is in the bus's ledger, as `make flock-budget` shows it, and a
# restarted gateway keeps it.
run "make flock-budget" budget-1.log make flock-budget
spent=$(awk '$1 == "agent-1" {print $2}' "$logs/budget-1.log")
if [ "${spent:-0}" -le 0 ] || ! grep -q "day $(date -u +%F)" "$logs/budget-1.log"; then
  cat "$logs/budget-1.log" >&2; die "make flock-budget does not show agent-1's spend in today's window"
fi
docker restart "$flock-gateway" >/dev/null
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$flock-gateway" 2>/dev/null)" = healthy ]; do sleep 0.5; done
run "make flock-budget (after docker restart of the gateway)" budget-2.log make flock-budget
[ "$(awk '$1 == "agent-1" {print $2}' "$logs/budget-2.log")" = "$spent" ] ||
  { cat "$logs/budget-2.log" >&2; die "agent-1's spend changed across a gateway restart (was $spent)"; }
echo "   agent-1 spent $spent of 100000 tokens today; the same after docker restart of the gateway"
curl -fsS "http://127.0.0.1:9464/metrics" >"$logs/metrics-2.txt" || die "no metrics on 127.0.0.1:9464/metrics (with the gateway)"
grep -qE '^flock_tokens_spent_total\{agent="agent-1",upstream="[^"]+"\} [1-9]' "$logs/metrics-2.txt" ||
  { grep -E '^flock_(tokens|gateway|budget)' "$logs/metrics-2.txt" >&2; die "the metrics show no tokens agent-1 spent through the gateway"; }
echo "   the metrics: $(grep -E '^flock_tokens_spent_total\{agent="agent-1"' "$logs/metrics-2.txt" | head -1)"
# The board: a plan with one AI step (the example AI agent asks the fake
# model through the gateway), its answer reaching the next task as context.
run "make flock-plan (examples/plans/ask.yaml: one AI step through the gateway)" flock-plan-ask.log \
  make --no-print-directory flock-plan PLAN=examples/plans/ask.yaml
grep -q 'plan ask: all 3 tasks done' "$logs/flock-plan-ask.log" || { tail -20 "$logs/flock-plan-ask.log" >&2; die "the ask plan did not end done"; }
go run ./agent/cmd/flock-agent board show --nkey "$OPERATOR_KEY" ask file >"$logs/board-ask-file.log" 2>&1 || die "board show ask file failed"
grep -q "$answer" "$logs/board-ask-file.log" || { cat "$logs/board-ask-file.log" >&2; die "the file task's context lacks the model's answer"; }
echo "   the ask plan ran to done: the model's answer (through the gateway) reached the file task"
run "pulumi preview --expect-no-changes (with the gateway)" preview-3.log pulumi preview --expect-no-changes -s "$stack"
docker rm -f layer3-fake-model >/dev/null
docker image rm -f ai-flock-layer3/fake-model:latest >/dev/null
rm -f "$common/bin/ai-agent"

# 6b. The way out: a git host on "the internet" (TEST-NET-3, outside the
# pool and every range the gateway refuses), a network only the gateway
# joins, TLS from a CA of this run's own, HTTP basic with a token only the
# gateway holds. The rule lets agent-1 fetch, not push.
remote_host=git.layer3.example remote_ip=203.0.113.10 remote_port=8443
remote_seed=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
git_token="layer3-git-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
marker="layer3: cloned through the gateway"
run "build the git host (tests/e2e/gitremote)" build-remote.log bash -c "
  mkdir -p '$work/remote' && CGO_ENABLED=0 go build -o '$work/remote/gitremote' ./tests/e2e/gitremote &&
  printf 'FROM $tools_image\nCOPY gitremote /gitremote\nENTRYPOINT [\"/gitremote\"]\n' >'$work/remote/Dockerfile' &&
  docker build -q -t ai-flock-layer3/gitremote:latest '$work/remote'"
remote_ca=$(GITREMOTE_CA_SEED=$remote_seed "$work/remote/gitremote" ca) || die "gitremote ca failed"
pulumi config set --path 'flock:image.dockerfile' "$repo/tests/e2e/byo/Dockerfile" -s "$stack"
rule='flock:gateway.egress[0]'
pulumi config set --path "$rule.host" "$remote_host" -s "$stack"
pulumi config set --path "$rule.port" "$remote_port" -s "$stack"
pulumi config set --path "$rule.agents[0]" agent-1 -s "$stack"
pulumi config set --path "$rule.paths[0]" 'GET /*.git/info/refs?service=git-upload-pack' -s "$stack"
pulumi config set --path "$rule.paths[1]" 'POST /*.git/git-upload-pack' -s "$stack"
pulumi config set --path "$rule.roots" -s "$stack" -- "$remote_ca" # the PEM starts with dashes
pulumi config set --path "$rule.credential.basicUser" x-access-token -s "$stack"
pulumi config set --path "$rule.credential.secret" layer3GitToken -s "$stack"
pulumi config set --secret flock:layer3GitToken "$git_token" -s "$stack"
grep -q "$git_token" Pulumi.dev.yaml && die "the git token is in Pulumi.dev.yaml in plain text"
t0=$(now)
run "pulumi up (an egress rule; the agents on a Debian image with git)" up-egress.log pulumi up --yes -s "$stack"
wait_healthy "$count" 300
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$flock-gateway" 2>/dev/null)" = healthy ]; do
  [ "$(secs "$t0" "$(now)" | cut -d. -f1)" -lt 400 ] || die "the gateway is not healthy after the egress rule"
  sleep 0.5
done
record "pulumi up (an egress rule, agents rebuilt) to every agent healthy" "$(secs "$t0" "$(now)")"
docker network create --subnet 203.0.113.0/24 --gateway 203.0.113.1 layer3-internet >/dev/null
tmpfs=rw,noexec,nosuid,nodev,size=16m,uid=65534,gid=65534,mode=0700
docker run -d --name layer3-gitremote --network layer3-internet --ip "$remote_ip" --network-alias "$remote_host" \
  --read-only --cap-drop ALL --security-opt no-new-privileges:true --user 65534:65534 --tmpfs "/srv/git:$tmpfs" --tmpfs "/tmp:$tmpfs" \
  -e GITREMOTE_ADDR=":$remote_port" -e GITREMOTE_CA_SEED="$remote_seed" -e GITREMOTE_TOKEN="$git_token" -e GITREMOTE_ROOT=/srv/git \
  -e GITREMOTE_MARKER="$marker" -e HOME=/tmp ai-flock-layer3/gitremote:latest >/dev/null
docker network connect layer3-internet "$flock-gateway"
for _ in $(seq 100); do
  [ "$(docker exec layer3-gitremote curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$remote_port/_ready" 2>/dev/null)" = 204 ] && break
  sleep 0.3
done
# Each task runs in a directory of its own (HOME is not in its environment):
# the push clones again.
task() { go run ./agent/cmd/flock-agent task --nkey "$OPERATOR_KEY" --agent agent-1 -- sh -c "$1"; }
url=https://$remote_host:$remote_port/repo.git
run "agent-1: git clone through the gateway" git-clone.log task "rm -rf clone && git clone -q $url clone && cat clone/README"
grep -q "$marker" "$logs/git-clone.log" || { cat "$logs/git-clone.log" >&2; die "agent-1's clone lacks the remote's README"; }
if task "rm -rf c && git clone -q $url c && cd c && echo more >>README && git -c user.name=a -c user.email=a@layer3.example commit -qam change && git push origin main" >"$logs/git-push.log" 2>&1; then
  die "agent-1's push, which the rule does not allow, went through ($logs/git-push.log)"
fi
grep -q 403 "$logs/git-push.log" || { cat "$logs/git-push.log" >&2; die "agent-1's push failed, but not with the gateway's 403"; }
docker logs layer3-gitremote >"$logs/gitremote.log" 2>&1
grep -q '"authorized":true' "$logs/gitremote.log" || die "the git host saw no request with the gateway's credential ($logs/gitremote.log)"
! grep -q '"authorized":false' "$logs/gitremote.log" || die "the git host saw a request without the credential ($logs/gitremote.log)"
! grep -q 'receive-pack' "$logs/gitremote.log" || die "the push reached the git host ($logs/gitremote.log)"
for c in $(docker ps -q --filter "label=ai-flock.flock=$flock" --filter label=ai-flock.role=agent); do
  docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$c" | grep -q "$git_token" && die "an agent's environment holds the git token"
done
echo "   agent-1 cloned \"$marker\" with the credential only the gateway holds; its push: $(grep -m1 -o '403[^"]*' "$logs/git-push.log" | cut -c1-60)"
run "pulumi preview --expect-no-changes (with the egress rule)" preview-4.log pulumi preview --expect-no-changes -s "$stack"
docker rm -f layer3-gitremote >/dev/null
docker network disconnect -f layer3-internet "$flock-gateway"
docker network rm layer3-internet >/dev/null
docker image rm -f ai-flock-layer3/gitremote:latest >/dev/null

# 7. The policy pack: clean, then blocking a broken change.
run "make preview (diff with the policy pack)" policy-clean.log make --no-print-directory preview
! grep -qi 'mandatory' "$logs/policy-clean.log" || die "the policy pack reports violations on the stack ($logs/policy-clean.log)"
grep -q 'gateway-egress-ways-out' "$logs/policy-clean.log" || die "the policy pack does not name the egress rule's extra roots ($logs/policy-clean.log)"
# The file that declares the containers' read-only root, wherever it lives.
mapfile -t readonly_go < <(grep -rlE 'ReadOnly: +pulumi.Bool\(true\)' infra/dockerflock --include='*.go' | grep -v _test.go)
[ "${#readonly_go[@]}" -gt 0 ] || die "no container declares ReadOnly: pulumi.Bool(true) under infra/dockerflock"
sed -i -E 's/ReadOnly: +pulumi.Bool\(true\)/ReadOnly: pulumi.Bool(false)/' "${readonly_go[@]}"
git diff --quiet -- "${readonly_go[@]}" && die "could not break the stack for the policy test"
echo "== make preview, containers made writable"
t0=$(now)
if make --no-print-directory preview >"$logs/policy-broken.log" 2>&1; then
  die "the policy pack let a writable container through ($logs/policy-broken.log)"
fi
grep -q 'container-read-only-rootfs' "$logs/policy-broken.log" || die "the preview failed, but not on container-read-only-rootfs ($logs/policy-broken.log)"
echo "   blocked: $(grep -m1 -o 'container-read-only-rootfs.*' "$logs/policy-broken.log" | cut -c1-100)"
record "policy pack blocking a writable container" "$(secs "$t0" "$(now)")"
git checkout -q -- "${readonly_go[@]}"

# 8. Destroy, as the README says, and look for anything left.
run "make destroy" destroy.log make --no-print-directory destroy
deployed=0
left=$(docker ps -aq --filter "label=ai-flock.flock=$flock"; docker network ls -q --filter "label=ai-flock.flock=$flock"; docker images -q "ai-flock/$flock-*")
[ -z "$left" ] || die "left on the engine after destroy: $left"
engine_after=$(engine_count)
[ "$engine_after" = "$engine_before" ] || die "the engine held $engine_before before the deploy and holds $engine_after after destroy"
keys=$(find "$state_root" -name '*.nk*' 2>/dev/null || true)
[ -z "$keys" ] || die "credentials left on the host after destroy: $keys"
[ ! -e "$state_root/gateway" ] || die "the gateway's keys are left on the host after destroy: $state_root/gateway"
[ ! -e "$OPERATOR_KEY" ] || die "the operator key $OPERATOR_KEY is left after destroy"
echo "   the engine holds what it held before ($engine_after); no key under $state_root or at the operator key's path"
pulumi stack rm --yes -s "$stack" >/dev/null 2>&1 || true
rm -rf "$state_root/bus" "$state_root/disks" # the data a destroy keeps: this run's own, so the next starts with none

echo
echo "layer3: every step passed ($((count - 1)) agents, then $count, the gateway and an egress rule; $replicas bus node(s))"
printf '%s\n' "${table[@]}"
}

main "$@"; exit $? # on one line: bash never reads past it, even if the file changed
