// `anymoe serve`: the OpenAI-compatible HTTP server. It binds and listens
// first (so /health answers 503 "loading" during a long load), loads the
// model, starts the continuous-batching scheduler, and on SIGTERM/SIGINT
// drains: new requests get 503, running ones finish or are cancelled by
// --shutdown-timeout, and the process exits 0. A second signal exits at once.
// With --profile-out, SIGHUP writes the expert profile of the traffic so far
// (and shutdown writes the final one).
// Under mpirun (--ep) rank 0 does all that and the other ranks follow its
// steps (runtime/step_broadcast.h).
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "core/system_memory.h"
#include "models/memory_plan.h"
#include "models/model_fingerprint.h"
#include "runtime/expert_profile.h"
#include "runtime/scheduler.h"
#include "runtime/step_broadcast.h"
#include "server/completion_service.h"
#include "server/openai_server.h"

namespace anymoe::cli {
namespace {

struct ServeFlags {
  EngineOptions engine;
  ServerOptions server;
  SpeculativeOptions spec;
  int parallel = 8;
  int queue = 64;
  int64_t kv_tokens = 0;
  double shutdown_timeout = 10;
  std::string api_key_file;
  bool insecure_no_auth = false;
  bool no_request_log = false;
  bool no_prefix_cache = false;
  int64_t prefill_chunk = 0;
  int64_t prefill_depth_unit = -1;  // not given: DefaultPrefillDepthUnit of the model
  int debug_token_delay_ms = 0;
  bool no_slots = false;
  double request_timeout = 10;
  std::string profile_out;  // expert profile of the live traffic (SIGHUP, shutdown)
};

// glibc gives each thread that allocates its own arena (up to 8 per core),
// and an arena keeps what a large request once needed: each HTTP thread that
// parsed a 1 MiB body held on to 12-25 MB, ~230 MB over the threads (issue
// 20). Nothing on the hot path allocates (the decode step is allocation-free)
// so contention on fewer arenas costs nothing measurable; two bound the
// retained memory. MALLOC_ARENA_MAX in the environment still wins.
void LimitMallocArenas() {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
}

std::string DefaultModelName(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/"
  return p.filename().string();
}

Status ReadKeyFile(const std::string& path, std::string* key) {
  std::ifstream in(path);
  if (!in) return Status::Error("--api-key-file " + path + ": cannot open");
  std::getline(in, *key);
  while (!key->empty() && (key->back() == '\r' || key->back() == ' ')) key->pop_back();
  if (key->empty()) return Status::Error("--api-key-file " + path + ": the first line is empty");
  return Status::Ok();
}

// SIGINT/SIGTERM land in a handler that writes one byte to a pipe; a watcher
// thread reads it. (sigwait would need the signals blocked in every thread,
// but libraries such as OpenBLAS start threads before main.) SIGPIPE is
// ignored so a client that resets its connection mid-write cannot kill us.
int g_signal_pipe[2] = {-1, -1};

extern "C" void OnShutdownSignal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
}

class SignalWatcher {
 public:
  SignalWatcher() {
    std::signal(SIGPIPE, SIG_IGN);
    if (pipe(g_signal_pipe) != 0) std::perror("anymoe: pipe");
    struct sigaction sa {};
    sa.sa_handler = OnShutdownSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    std::thread([this] { Run(); }).detach();
  }
  // Blocks until the first signal.
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return signals_ > 0; });
  }
  // From now on SIGHUP calls `on_hangup` (on the watcher's thread) instead of
  // ending the process.
  void OnHangup(std::function<void()> on_hangup) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      on_hangup_ = std::move(on_hangup);
    }
    struct sigaction sa {};
    sa.sa_handler = OnShutdownSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, nullptr);
  }
  // Before the model is loaded there is nothing to drain: exit at the first signal.
  void SetDraining() {
    std::lock_guard<std::mutex> lock(mu_);
    draining_possible_ = true;
  }

 private:
  void Run() {
    for (;;) {
      unsigned char sig = 0;
      const ssize_t n = read(g_signal_pipe[0], &sig, 1);
      if (n != 1) {
        if (n < 0 && errno == EINTR) continue;
        return;
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (sig == SIGHUP) {
        const std::function<void()> on_hangup = on_hangup_;
        lock.unlock();
        if (on_hangup) on_hangup();
        continue;
      }
      ++signals_;
      if (!draining_possible_) {
        std::fprintf(stderr, "anymoe: signal %d while loading; exiting\n", int(sig));
        std::_Exit(0);
      }
      if (signals_ > 1) {
        std::fprintf(stderr, "anymoe: second signal; exiting without draining\n");
        std::_Exit(1);
      }
      std::fprintf(stderr, "anymoe: signal %d; draining (a second signal exits at once)\n",
                   int(sig));
      lock.unlock();
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int signals_ = 0;
  bool draining_possible_ = false;
  std::function<void()> on_hangup_;
};

// Under expert parallelism every rank but 0 runs rank 0's steps with its own
// experts and serves nothing itself. Once loaded, it ignores SIGTERM/SIGINT
// (mpirun passes them to every rank): it ends when rank 0, draining, says so.
// While loading they end it, as they end rank 0 then.
int FollowRankZero(ServeFlags& f) {
  f.engine.progress = false;
  f.engine.kv_cache_tokens = f.kv_tokens;
  f.engine.sequences = f.parallel;
  auto engine = LoadEngineOrReport(f.engine);
  if (!engine) return 1;
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
  const int64_t tokens = f.kv_tokens > 0 ? f.kv_tokens : int64_t(f.parallel) * engine->context();
  Status st = FollowSteps(engine->model(), *engine->communicator(), tokens, engine->context());
  if (!st.ok()) return ReportError(st);
  return 0;
}

// Rank 0 of an expert-parallel server: a failed exchange ends the job (the
// step's requests got 503 first); Abort takes every rank down with it.
[[noreturn]] void EndJob(Communicator& comm, const Status& error) {
  std::fprintf(stderr, "anymoe: error: %s; stopping every rank\n", error.message().c_str());
  comm.Abort(1);
}

int Serve(ServeFlags& f) {
  if (f.engine.expert_parallel.enabled && MpiLaunchSize() > 1) {
    // Which rank this is decides whether it binds the port: MPI's environment
    // tells before MPI starts (Engine::Load joins the job).
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (rank == nullptr) rank = std::getenv("PMIX_RANK");
    if (rank == nullptr) rank = std::getenv("PMI_RANK");
    if (rank != nullptr && std::atoi(rank) != 0) return FollowRankZero(f);
  } else if (Status st = SingleProcessOnly("serve"); !st.ok()) {
    return ReportError(st);
  }
  LimitMallocArenas();
  ServerOptions& so = f.server;
  if (!f.api_key_file.empty()) {
    Status st = ReadKeyFile(f.api_key_file, &so.api_key);
    if (!st.ok()) return ReportError(st);
  }
  if (!IsLoopbackHost(so.host) && so.api_key.empty() && !f.insecure_no_auth) {
    return ReportError(
        Status::Error("--host " + so.host +
                      " is reachable from other machines: set --api-key (or "
                      "--api-key-file), or pass --insecure-no-auth to serve without one"));
  }
  if (so.model_name.empty()) so.model_name = DefaultModelName(f.engine.model_path);
  if (so.http_threads == 0) so.http_threads = f.parallel + f.queue + 16;
  so.log_requests = !f.no_request_log;
  so.debug_token_delay = std::chrono::milliseconds(f.debug_token_delay_ms);
  so.slots_endpoint = !f.no_slots;
  so.request_timeout = std::chrono::milliseconds(int64_t(f.request_timeout * 1000));

  // Never destroyed: its thread waits on the pipe until the process exits.
  static SignalWatcher& signals = *new SignalWatcher;
  OpenAiServer server(so);
  if (Status st = server.Bind(); !st.ok()) return ReportError(st);
  server.Start();
  std::fprintf(
      stderr, "anymoe: listening on http://%s:%d%s\n",
      so.host.find(':') != std::string::npos ? ("[" + so.host + "]").c_str() : so.host.c_str(),
      server.port(), so.api_key.empty() ? "" : " (API key required)");

  f.engine.progress = false;
  // Device backends reserve the whole KV pool at load, as the scheduler sizes it.
  f.engine.kv_cache_tokens = f.kv_tokens;
  f.engine.sequences = f.parallel;
  if (f.spec.kind == SpecKind::kMtp) f.engine.load_mtp = true;
  auto engine = LoadEngineOrReport(f.engine);
  if (!engine) return 1;
  if (f.kv_tokens > 0 && f.kv_tokens < engine->context()) {
    return ReportError(Status::Error(
        "--kv-tokens " + std::to_string(f.kv_tokens) + " is smaller than the context of " +
        std::to_string(engine->context()) +
        " tokens (-c/--ctx, capped by the model): a request that uses its whole context could "
        "never be admitted; raise --kv-tokens or lower -c"));
  }
  SchedulerOptions sched;
  sched.max_parallel = f.parallel;
  sched.max_queue = f.queue;
  sched.context = engine->context();
  sched.kv_cache_tokens = f.kv_tokens;
  sched.prefix_cache = !f.no_prefix_cache;
  sched.prefill_chunk = f.prefill_chunk;
  sched.prefill_depth_unit = f.prefill_depth_unit >= 0
                                 ? f.prefill_depth_unit
                                 : DefaultPrefillDepthUnit(engine->model().config());
  sched.between_steps = [&server] { server.AwaitResponseWrites(); };
  sched.spec = f.spec;
  if (sched.spec.kind != SpecKind::kNone && engine->model().routing_stats().cache.enabled) {
    // Drafted rows route to experts of their own: with experts streamed from
    // the file, verifying them reads experts a plain step would not.
    std::fprintf(stderr, "anymoe: experts stream from the file: --spec %s is off\n",
                 std::string(SpecKindName(sched.spec.kind)).c_str());
    sched.spec.kind = SpecKind::kNone;
  }
  std::unique_ptr<StepSender> sender;
  if (Communicator* comm = engine->communicator(); comm != nullptr) {
    sender = std::make_unique<StepSender>(*comm);
    sched.before_forward = [s = sender.get()](std::span<const Model::SequenceStep> steps) {
      return s->Send(steps);
    };
    sched.between_steps = [&server, comm] {
      server.AwaitResponseWrites();
      if (comm->failed()) EndJob(*comm, Status::Error(comm->failure()));
    };
    sched.idle = [s = sender.get(), comm] {
      if (Status st = s->Heartbeat(); !st.ok()) EndJob(*comm, st);
    };
    sched.idle_interval = std::chrono::milliseconds(
        int64_t(std::min(1000.0, comm->timeout_s() * 1000 / 4)));
  }
  // The profiler sees the scheduler thread's steps; SIGHUP and shutdown
  // snapshot it from theirs.
  std::unique_ptr<ExpertProfiler> profiler;
  const auto write_profile = [&f, &profiler] {
    Status st = profiler->Snapshot().Write(f.profile_out);
    if (st.ok()) {
      std::fprintf(stderr, "anymoe: wrote the expert profile to %s\n", f.profile_out.c_str());
    } else {
      std::fprintf(stderr, "anymoe: error: expert profile: %s\n", st.message().c_str());
    }
  };
  if (!f.profile_out.empty()) {
    if (!engine->model().config().is_moe()) {
      return ReportError(Status::Error("--profile-out: " + f.engine.model_path +
                                       " has no routed experts to profile"));
    }
    profiler = std::make_unique<ExpertProfiler>(engine->model().config(), f.engine.model_path,
                                                ModelFingerprint(engine->file()), "serve");
    engine->model().SetObserver(&profiler->observer());
    signals.OnHangup(write_profile);
  }
  auto scheduler = Scheduler::Create(*engine, sched);
  if (!scheduler.ok()) return ReportError(scheduler.status());
  std::unique_ptr<CompletionService> service = SchedulerService(std::move(scheduler).value());
  server.SetReady({engine.get(), service.get(), sched.context, sched.max_parallel});
  signals.SetDraining();
  std::fprintf(stderr,
               "anymoe: ready: %s, context %lld, %d parallel, queue %d, %s KV cache, prefill "
               "depth unit %lld\n",
               so.model_name.c_str(), static_cast<long long>(sched.context), f.parallel, f.queue,
               std::string(Name(engine->kv_type())).c_str(),
               static_cast<long long>(sched.prefill_depth_unit));
  const bool host = engine->backend().kind() == BackendKind::kCpu;
  const ExpertStreamingPlan& streaming = engine->expert_streaming();
  const MemoryPlan& plan = streaming.stream ? streaming.streamed : streaming.resident;
  const auto mib = [](uint64_t bytes) { return double(bytes) / double(1 << 20); };
  // The sampling state of every sequence decoded at once, beside the model's plan.
  const uint64_t sampling =
      Scheduler::SamplingBytes(engine->model().config().vocab_size, f.parallel);
  if (host) {
    // What this process should stay within (weights, the whole KV pool, step
    // buffers, scratch, expert cache, sampling), to compare with its RSS.
    std::fprintf(stderr,
                 "anymoe: memory plan: %s; sampling %.1f MiB for %d sequences; the process held "
                 "%.1f MiB before loading weights\n",
                 DescribeMemoryPlan(plan).c_str(), mib(sampling), f.parallel,
                 mib(engine->resident_before_weights()));
  }

  signals.Wait();
  const auto timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(f.shutdown_timeout));
  server.Drain(std::chrono::steady_clock::now() + timeout);
  if (profiler) {  // the scheduler thread is gone: the final counts
    signals.OnHangup(nullptr);
    write_profile();
  }
  if (sender) {  // the scheduler thread is gone: the other ranks may stop too
    if (Status st = sender->Stop(); !st.ok()) EndJob(*engine->communicator(), st);
  }
  if (host) {
    // The peak against the plan: what it leaves out (handler threads, requests
    // in flight, code first run while serving) is the difference.
    const uint64_t peak = ProcessPeakResidentBytes();
    const uint64_t planned = plan.total() + sampling + engine->resident_before_weights();
    std::fprintf(stderr,
                 "anymoe: peak resident memory %.1f MiB: the plan %.1f MiB + sampling %.1f MiB + "
                 "%.1f MiB held before loading weights %s %.1f MiB\n",
                 mib(peak), mib(plan.total()), mib(sampling),
                 mib(engine->resident_before_weights()), peak >= planned ? "+" : "-",
                 mib(peak >= planned ? peak - planned : planned - peak));
  }
  std::fprintf(stderr, "anymoe: stopped\n");
  return 0;
}

}  // namespace

CommandFn RegisterServe(CLI::App& cmd) {
  auto f = std::make_shared<ServeFlags>();
  AddEngineOptions(cmd, f->engine);
  AddExpertParallelOptions(cmd, f->engine.expert_parallel);
  ServerOptions& so = f->server;
  f->spec.min_acceptance = 0.3f;  // the server drafts only while it pays
  AddSpecOptions(cmd, f->spec, /*allow_mtp=*/true);
  cmd.add_option("--host", so.host, "address to listen on (default 127.0.0.1: this machine only)");
  cmd.add_option("--port", so.port, "TCP port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535));
  cmd.add_option("--api-key", so.api_key,
                 "require this key (Authorization: Bearer KEY or X-Api-Key) on every route "
                 "but /health and /");
  cmd.add_option("--admin-key", so.admin_key,
                 "key of the admin routes (POST /admin/experts: live expert swap), sent as "
                 "X-Admin-Key: KEY; without it they do not exist");
  cmd.add_option("--api-key-file", f->api_key_file, "read the API key from the first line of FILE");
  cmd.add_flag("--insecure-no-auth", f->insecure_no_auth,
               "allow a non-loopback --host without an API key");
  cmd.add_option("--parallel", f->parallel, "sequences decoded together")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--queue", f->queue, "requests waiting for a slot before 503")
      ->check(CLI::Range(1, 1 << 16));
  cmd.add_option("--kv-tokens", f->kv_tokens, "KV cache size in tokens (0: parallel x ctx)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  cmd.add_option("--prefill-chunk", f->prefill_chunk,
                 "most prompt tokens prefilled per step, all requests together, between the "
                 "others' decode steps (0: what --batch leaves after the decode rows)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  cmd.add_option("--prefill-depth-unit", f->prefill_depth_unit,
                 "while others decode, a prompt token at depth D counts as 1 + D / N tokens of "
                 "the prefill budget, so chunks deep in a long prompt shrink (0: off; default: "
                 "from the model's shapes, see docs/server.md)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  cmd.add_option("--alias", so.model_name,
                 "model id in /v1/models and responses "
                 "(default: the file name)");
  cmd.add_option("--cors-origin", so.cors_origin,
                 "allow cross-origin requests from this origin (\"*\": any); off by default");
  cmd.add_option("--shutdown-timeout", f->shutdown_timeout,
                 "seconds running requests may take to finish after SIGTERM")
      ->check(FiniteNumber(0.0, 86400.0));
  cmd.add_option("--max-body-bytes", so.max_body_bytes, "request body limit (413 above)")
      ->check(CLI::Range(size_t(1024), size_t(1) << 30));
  cmd.add_option("--http-threads", so.http_threads,
                 "requests handled at once; as many more may wait (0: parallel + queue + 16)")
      ->check(CLI::Range(0, 4096));
  cmd.add_option("--max-connections", so.max_connections,
                 "open connections; a new one past the limit replaces the longest idle, or "
                 "gets 503 (0: max(256, 2 x http-threads))")
      ->check(CLI::Range(0, 65536));
  cmd.add_option("--request-timeout", f->request_timeout,
                 "seconds from a request's first byte to the end of its body (408 past it)")
      ->check(FiniteNumber(0.1, 3600.0));
  cmd.add_option("--profile-out", f->profile_out,
                 "write the expert profile of the traffic served (anymoe profile's format) "
                 "to FILE.json on SIGHUP and at shutdown");
  cmd.add_flag("--no-request-log", f->no_request_log, "do not log one line per request");
  cmd.add_flag("--no-slots", f->no_slots, "answer GET /slots with 501 (as llama-server's --no-slots)");
  cmd.add_flag("--no-prefix-cache", f->no_prefix_cache,
               "do not share the KV blocks of identical prompt prefixes across requests");
  cmd.add_option("--debug-token-delay-ms", f->debug_token_delay_ms,
                 "testing: sleep after every token on the scheduler thread")
      ->check(CLI::Range(0, 10000))
      ->group("");
  return [f] { return Serve(*f); };
}

}  // namespace anymoe::cli
