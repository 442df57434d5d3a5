#!/usr/bin/env bash
# Every benchmark the README quotes, printed as one table. Run from the repo
# root (make bench). Figures are this machine's; CI does not run this.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v /usr/bin/time >/dev/null || { echo "bench: needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

row() { printf '| %-58s | %-28s | %-22s |\n' "$1" "$2" "$3"; }

# stack_bench NAME PATTERN TARGET: the program under the mock engine, one run
# in its own process so its peak RSS is the program's alone.
stack_bench() {
  local name=$1 pattern=$2 target=$3
  go test -c -o "$out/stacks.test" ./tests/stacks >/dev/null
  (cd tests/stacks && /usr/bin/time -v "$out/stacks.test" -test.run '^$' -test.bench "$pattern" -test.benchtime 1x) >"$out/b.txt" 2>"$out/t.txt"
  local ns rss
  ns=$(awk '/^Benchmark/ {print $3}' "$out/b.txt")
  rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$out/t.txt")
  [ -n "$ns" ] || { cat "$out/b.txt" "$out/t.txt" >&2; echo "bench: $pattern did not run" >&2; exit 1; }
  row "$name" "$(awk -v n="$ns" 'BEGIN {printf "%.2f s", n/1e9}'), $((rss / 1024)) MiB peak RSS" "$target"
}

row "benchmark" "measured" "target"
row "---" "---" "---"
stack_bench "dev stack, 500 agents, mock engine" 'BenchmarkDevStack500$' "< 10 s, < 1 GiB"
if grep -q 'func BenchmarkAWSStack500' tests/stacks/*_test.go 2>/dev/null; then
  stack_bench "aws stack, 500 agents, mock engine" 'BenchmarkAWSStack500$' "< 15 s"
fi
echo
# The agent: idle RSS, image size, tasks/s and latency, time to first heartbeat.
go run ./tests/bench/flock-bench
echo
# The model gateway: a small call straight to a fake model and through the
# gateway in the same run (p50/p99), the ledger in memory against the bus's on
# one and three nodes (p50/p99, 32 calls at once), and the gateway's idle RSS.
echo "gateway (go test -bench ./agent/gateway ./agent/cmd/flock-gateway):"
go test -run '^$' -bench . -benchtime 2000x ./agent/gateway | grep '^Benchmark'
go test -run '^$' -bench IdleRSS ./agent/cmd/flock-gateway | grep '^Benchmark'
echo
echo "egress broker: a GET direct, through a blind tunnel and brokered (p50/p99); 100 MB through the tunnel and brokered (MB/s, CPU per MB)"
echo "  (go test -bench 'EgressGET|EgressDownload' ./agent/gateway/broker):"
go test -run '^$' -bench 'EgressGET|EgressDownload' -benchtime 2s ./agent/gateway/broker | grep '^Benchmark'
echo "the gateway binary's memory idle and with 50 agents brokered at once (go test -bench EgressRSS50Agents ./agent/cmd/flock-gateway):"
go test -run '^$' -bench EgressRSS50Agents -benchtime 1x ./agent/cmd/flock-gateway | grep '^Benchmark'
echo
# The bus's reply guard: a client's bytes parsed and written anew against
# passed on as they are, in the same run.
echo "bus reply guard (go test -bench ReplyGuard ./agent/bus):"
go test -run '^$' -bench ReplyGuard -benchtime 2s ./agent/bus | grep '^Benchmark'
echo
# The metrics exporter's cost on the trivial-task throughput: on against off,
# interleaved, in the same run (one-node bus).
echo "metrics exporter (go run ./tests/bench/metrics-cost):"
go run ./tests/bench/metrics-cost
echo "metrics exporter, three-node bus (go test -bench MetricsCostThreeNodes ./tests/bench):"
go test -run '^$' -bench MetricsCostThreeNodes -benchtime 3x ./tests/bench | grep '^Benchmark'
echo
# A plan with one of its agents killed mid-plan, beside none killed and the
# killed one started again at once, in the same run.
go run ./tests/bench/dead-agent
echo
# From nothing to every task healthy on the local engine, for the same agent
# counts: the dev stack's replay beside the aws stack run as Fargate would
# (tests/fargate). Needs root and a Docker engine.
if [ "$(id -u)" -eq 0 ] && docker info >/dev/null 2>&1; then
  echo "replays (go run ./tests/bench/replay-up):"
  go run ./tests/bench/replay-up -agents 3,20
fi
