// The libuv loop thread and its extension processes (see event_loop.hpp).
#include "io/event_loop.hpp"

#include <algorithm>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "io/line_framer.hpp"

namespace dhara::io {

namespace {
constexpr std::size_t read_buffer_bytes = 64 * 1024;
constexpr std::size_t stderr_tail_bytes = 4 * 1024;
// After the process itself exited, how long its stdout may stay open (a grandchild holding
// the pipe) before it is closed by force; and after its stdout closed, how long the process
// may take to exit before it is ended as a violation.
constexpr std::uint64_t eof_after_exit_ms = 200;
thread_local const event_loop* running_loop = nullptr;  // the loop whose thread this is

// The process groups of every live extension, of every loop (kill_every_process_group_now).
std::mutex live_groups_mutex;
std::set<int>& live_groups() {
  static std::set<int> groups;
  return groups;
}
}  // namespace

void kill_every_process_group_now() {
  std::lock_guard<std::mutex> guard{live_groups_mutex};
  for (int pid : live_groups()) ::kill(-pid, SIGKILL);
}

// One extension process and its three pipes. Lives on the loop thread only.
struct proc {
  event_loop::impl* owner = nullptr;
  std::uint64_t id = 0;
  process_callbacks cb;
  spawn_request req;
  uv_process_t handle{};
  uv_pipe_t in{}, out{}, err{};
  uv_timer_t eof_timer{};
  int open_handles = 0;  // freed when the last one closes
  int pid = 0;
  bool exited = false, out_eof = false, err_eof = false, reported = false, reading = true;
  process_exit exit;
  std::unique_ptr<line_framer> framer;
  char buf[read_buffer_bytes];
  int log_fd = -1;
  std::size_t log_bytes = 0;
};

struct event_loop::impl {
  event_loop* self = nullptr;
  uv_loop_t loop{};
  uv_async_t async{};
  uv_timer_t kill_timer{};
  bool stopping = false;
  bool finished = false;
  struct watch {
    uv_poll_t handle{};
    int fd = -1;  // its own inotify instance
    std::function<void(std::string)> on_change;
  };

  static void close_watch(watch* w) {
    uv_poll_stop(&w->handle);
    uv_close(reinterpret_cast<uv_handle_t*>(&w->handle), [](uv_handle_t* h) {
      auto* closed = static_cast<watch*>(h->data);
      ::close(closed->fd);
      delete closed;
    });
  }

  // Reads every pending event; lost events or a folder gone are reported as "".
  static void read_watch(uv_poll_t* h, int, int) {
    auto* w = static_cast<watch*>(h->data);
    alignas(inotify_event) char buf[8192];
    for (;;) {
      ssize_t n = ::read(w->fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // EAGAIN: drained
      for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
        // The queue overflowed, or the folder itself went away (the watch ends): anything
        // may have changed.
        if (ev->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF)) w->on_change("");
        else if (ev->len > 0) w->on_change(ev->name);  // the name is NUL-padded
        at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      }
    }
  }
  std::vector<watch*> watches;
  std::unordered_map<std::uint64_t, proc*> procs;

  proc* find(std::uint64_t id) {
    auto it = procs.find(id);
    return it == procs.end() ? nullptr : it->second;
  }

  static void close_one(uv_handle_t* h) {
    if (uv_is_closing(h)) return;
    uv_close(h, [](uv_handle_t* closed) {
      auto* p = static_cast<proc*>(closed->data);
      if (--p->open_handles == 0) {
        if (p->log_fd >= 0) ::close(p->log_fd);
        p->owner->procs.erase(p->id);
        delete p;
      }
    });
  }

  void kill_group(proc* p, int signum) {
    if (p->pid > 0 && !p->reported) ::kill(-p->pid, signum);  // the whole process group
  }

  void forget_stdin(std::uint64_t id) {
    std::shared_ptr<event_loop::stdin_state> in;
    {
      std::lock_guard<std::mutex> guard{self->mtx_};
      auto it = self->stdin_.find(id);
      if (it == self->stdin_.end()) return;
      in = std::move(it->second);
      self->stdin_.erase(it);
    }
    std::lock_guard<std::mutex> guard{in->lock};  // waits for a write in progress
    in->fd = -1;
  }

  // Writers stop writing to the descriptor before it is closed (and its number reused).
  void close_stdin(proc* p) {
    forget_stdin(p->id);
    close_one(reinterpret_cast<uv_handle_t*>(&p->in));
  }

  // One queued write is finished (written, failed or dropped).
  void write_done(std::uint64_t id, std::size_t bytes) {
    auto in = self->find_stdin(id);
    if (!in) return;
    std::lock_guard<std::mutex> guard{in->lock};
    if (in->queued > 0) --in->queued;
    in->queued_bytes -= std::min(in->queued_bytes, bytes);
  }

  void maybe_report(proc* p) {
    if (p->reported || !p->exited || !p->out_eof) return;
    kill_group(p, SIGKILL);  // leave no grandchild behind (before `reported` disarms it)
    p->reported = true;
    {
      std::lock_guard<std::mutex> guard{live_groups_mutex};
      live_groups().erase(p->pid);
    }
    close_stdin(p);
    close_one(reinterpret_cast<uv_handle_t*>(&p->out));
    close_one(reinterpret_cast<uv_handle_t*>(&p->err));
    close_one(reinterpret_cast<uv_handle_t*>(&p->eof_timer));
    close_one(reinterpret_cast<uv_handle_t*>(&p->handle));
    self->live_.fetch_sub(1);
    if (p->cb.on_exit) p->cb.on_exit(std::move(p->exit));
    if (stopping && self->live_.load() == 0) finish_stop();
  }

  void violation(proc* p, std::string reason) {
    if (p->exit.violation.empty()) p->exit.violation = std::move(reason);
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&p->out));
    kill_group(p, SIGKILL);
  }

  void on_stdout(proc* p, ssize_t n) {
    if (n < 0) {
      p->out_eof = true;
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&p->out));
      if (!p->exited) {
        // It can no longer answer anything. A process that is exiting closes its stdout just
        // before its exit is seen, so it gets a moment; one that lives on is ended, at once
        // rather than each of its calls waiting for its timeout.
        uv_timer_start(&p->eof_timer, [](uv_timer_t* t) {
          auto* q = static_cast<proc*>(t->data);
          if (!q->exited && !q->reported) q->owner->violation(q, "it closed its stdout but kept running");
        }, eof_after_exit_ms, 0);
      }
      maybe_report(p);
      return;
    }
    if (!p->exit.violation.empty()) return;  // already condemned: drop what it still says
    std::vector<std::string> lines;
    bool ok = p->framer->feed(std::string_view(p->buf, static_cast<std::size_t>(n)),
                              [&](std::string_view line) { lines.emplace_back(line); });
    if (!lines.empty() && p->cb.on_lines) {
      if (read_credit* c = p->cb.credit.get()) {
        // Pause first, count second: the receiver then always sees `paused` when it drains.
        if (c->pending.load() + 1 >= read_credit::limit) {
          c->paused.store(true);
          p->reading = false;
          uv_read_stop(reinterpret_cast<uv_stream_t*>(&p->out));
        }
        c->pending.fetch_add(1);
      }
      p->cb.on_lines(std::move(lines));
    }
    if (!ok) violation(p, std::string(p->framer->violation()));
  }

  void on_stderr(proc* p, ssize_t n) {
    if (n < 0) {
      p->err_eof = true;
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&p->err));
      return;
    }
    std::string_view chunk(p->buf, static_cast<std::size_t>(n));
    std::string& tail = p->exit.stderr_tail;
    tail.append(chunk);
    if (tail.size() > 2 * stderr_tail_bytes) tail.erase(0, tail.size() - stderr_tail_bytes);
    if (p->req.stderr_log.empty()) return;
    if (p->log_bytes + chunk.size() > p->req.stderr_log_cap && p->log_fd >= 0) {
      ::close(p->log_fd);  // rotate: keep one backup
      std::string backup = p->req.stderr_log + ".1";
      ::rename(p->req.stderr_log.c_str(), backup.c_str());
      p->log_fd = -1;
      p->log_bytes = 0;
    }
    if (p->log_fd < 0)
      p->log_fd = ::open(p->req.stderr_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (p->log_fd >= 0 && ::write(p->log_fd, chunk.data(), chunk.size()) > 0) p->log_bytes += chunk.size();
  }

  void do_spawn(std::uint64_t id, spawn_request req, process_callbacks cb) {
    if (req.argv.empty() || req.argv.front().empty()) {
      // Nothing to start: report it without creating handles (an unspawned uv_process_t
      // must not be closed).
      forget_stdin(id);
      if (cb.on_spawn_error) cb.on_spawn_error("no command to run");
      return;
    }
    auto* p = new proc;
    p->owner = this;
    p->id = id;
    p->cb = std::move(cb);
    p->req = std::move(req);
    p->framer = std::make_unique<line_framer>(p->req.max_line_bytes);
    procs[id] = p;
    for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&p->handle), reinterpret_cast<uv_handle_t*>(&p->in),
                           reinterpret_cast<uv_handle_t*>(&p->out), reinterpret_cast<uv_handle_t*>(&p->err),
                           reinterpret_cast<uv_handle_t*>(&p->eof_timer)}) {
      h->data = p;
    }
    uv_pipe_init(&loop, &p->in, 0);
    uv_pipe_init(&loop, &p->out, 0);
    uv_pipe_init(&loop, &p->err, 0);
    uv_timer_init(&loop, &p->eof_timer);
    p->open_handles = 5;
    p->in.data = p->out.data = p->err.data = p->eof_timer.data = p;

    std::vector<char*> args, envp;
    for (auto& a : p->req.argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : p->req.env) envp.push_back(e.data());
    envp.push_back(nullptr);
    // stdin and stdout are pipes, not the socketpairs libuv's UV_CREATE_PIPE makes: a pipe
    // write copies into the pipe's pages, a unix-socket send allocates a socket buffer per
    // message (docs/performance.md has the A/B).
    int to_child[2] = {-1, -1}, from_child[2] = {-1, -1};  // [0] the reading end, [1] the writing end
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0) {
      std::string why = std::string("cannot create a pipe: ") + std::strerror(errno);
      for (int fd : {to_child[0], to_child[1]})
        if (fd >= 0) ::close(fd);
      fail_spawn(p, std::move(why));
      return;
    }
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_INHERIT_FD;
    stdio[0].data.fd = to_child[0];
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = from_child[1];
    stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(&p->err);
    uv_process_options_t opts{};
    opts.file = p->req.argv[0].c_str();
    opts.args = args.data();
    opts.env = envp.data();
    opts.cwd = p->req.cwd.c_str();
    opts.stdio_count = 3;
    opts.stdio = stdio;
    // Its own process group (setsid), so signals reach whatever it forks too.
    opts.flags = UV_PROCESS_DETACHED;
    opts.exit_cb = [](uv_process_t* h, int64_t status, int sig) {
      auto* pr = static_cast<proc*>(h->data);
      pr->exited = true;
      pr->exit.exit_status = status;
      pr->exit.term_signal = sig;
      if (!pr->out_eof) {
        // Kill stragglers in the group, then give stdout a moment to drain before closing.
        pr->owner->kill_group(pr, SIGKILL);
        uv_timer_start(&pr->eof_timer, [](uv_timer_t* t) {
          auto* q = static_cast<proc*>(t->data);
          q->out_eof = true;
          q->owner->maybe_report(q);
        }, eof_after_exit_ms, 0);
      }
      pr->owner->maybe_report(pr);
    };
    int rc = uv_spawn(&loop, &p->handle, &opts);
    const bool started = rc == 0;
    ::close(to_child[0]);  // the child's ends: it has its copies
    ::close(from_child[1]);
    if (rc == 0 && (rc = uv_pipe_open(&p->in, to_child[1])) == 0) to_child[1] = -1;  // the handle owns it now
    if (rc == 0 && (rc = uv_pipe_open(&p->out, from_child[0])) == 0) from_child[0] = -1;
    for (int fd : {to_child[1], from_child[0]})
      if (fd >= 0) ::close(fd);
    if (!started) {
      fail_spawn(p, uv_strerror(rc));
      return;
    }
    // Started, but without both pipes dhara cannot talk to it: killed, its exit is reported.
    if (rc < 0) ::kill(-p->handle.pid, SIGKILL);
    p->pid = p->handle.pid;
    {
      std::lock_guard<std::mutex> guard{live_groups_mutex};
      live_groups().insert(p->pid);
    }
    self->live_.fetch_add(1);
    uv_os_fd_t in_fd = -1;
    if (uv_fileno(reinterpret_cast<uv_handle_t*>(&p->in), &in_fd) == 0) {
      ::fcntl(in_fd, F_SETFL, ::fcntl(in_fd, F_GETFL) | O_NONBLOCK);  // a direct write never blocks
      if (auto in = self->find_stdin(id)) {
        std::lock_guard<std::mutex> guard{in->lock};
        in->fd = in_fd;
      }
    }
    start_reading(p);
    uv_read_start(reinterpret_cast<uv_stream_t*>(&p->err), alloc, [](uv_stream_t* s, ssize_t n, const uv_buf_t*) {
      auto* pr = static_cast<proc*>(s->data);
      if (n != 0) pr->owner->on_stderr(pr, n);
    });
  }

  // Both pipes read into the process's one buffer: libuv runs alloc, read and callback for
  // one stream at a time on this thread, and each callback consumes the bytes at once.
  static void alloc(uv_handle_t* h, size_t, uv_buf_t* b) {
    auto* pr = static_cast<proc*>(h->data);
    *b = uv_buf_init(pr->buf, sizeof pr->buf);
  }

  static void start_reading(proc* p) {
    uv_read_start(reinterpret_cast<uv_stream_t*>(&p->out), alloc, [](uv_stream_t* s, ssize_t n, const uv_buf_t*) {
      auto* pr = static_cast<proc*>(s->data);
      if (n != 0) pr->owner->on_stdout(pr, n);
    });
  }

  void fail_spawn(proc* p, std::string why) {
    p->reported = true;  // nothing to report later
    forget_stdin(p->id);
    for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&p->handle), reinterpret_cast<uv_handle_t*>(&p->in),
                           reinterpret_cast<uv_handle_t*>(&p->out), reinterpret_cast<uv_handle_t*>(&p->err),
                           reinterpret_cast<uv_handle_t*>(&p->eof_timer)})
      close_one(h);  // required even after a failed uv_spawn
    if (p->cb.on_spawn_error) p->cb.on_spawn_error(std::move(why));
  }

  void do_write(std::uint64_t id, std::string bytes) {
    proc* p = find(id);
    if (!p || p->reported || uv_is_closing(reinterpret_cast<uv_handle_t*>(&p->in))) return write_done(id, bytes.size());
    auto* stream = reinterpret_cast<uv_stream_t*>(&p->in);
    if (uv_stream_get_write_queue_size(stream) + bytes.size() > p->req.max_write_queue_bytes) {
      violation(p, "it does not read its input (more than " + std::to_string(p->req.max_write_queue_bytes) +
                       " bytes queued)");
      return write_done(id, bytes.size());
    }
    struct write_req {
      uv_write_t req;
      std::string data;
      impl* owner;
      std::uint64_t id;
    };
    auto* w = new write_req{{}, std::move(bytes), this, id};
    uv_buf_t b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    int rc = uv_write(&w->req, stream, &b, 1, [](uv_write_t* r, int status) {
      auto* done = reinterpret_cast<write_req*>(r);
      if (status < 0 && status != UV_ECANCELED) done->owner->input_refused(done->id);
      done->owner->write_done(done->id, done->data.size());
      delete done;
    });
    if (rc < 0) {
      const std::size_t size = w->data.size();
      delete w;
      input_refused(id);
      write_done(id, size);
    }
  }

  // A write to the process's stdin failed (EPIPE: its stdin is closed). One that is exiting
  // gets the moment a closed stdout gets; one that lives on can never be given a call again
  // and is ended, rather than each call written into the closed pipe waiting for its timeout
  // (a review: 120 s each by default).
  void input_refused(std::uint64_t id) {
    proc* p = find(id);
    if (!p || p->exited || p->reported || p->out_eof || !p->exit.violation.empty() ||
        uv_is_active(reinterpret_cast<uv_handle_t*>(&p->eof_timer)))
      return;  // its end is on its way already
    uv_timer_start(&p->eof_timer, [](uv_timer_t* t) {
      auto* q = static_cast<proc*>(t->data);
      if (!q->exited && !q->reported) q->owner->violation(q, "it closed its stdin but kept running");
    }, eof_after_exit_ms, 0);
  }

  void begin_stop(std::uint64_t grace_ms) {
    stopping = true;
    for (watch* w : watches) close_watch(w);
    watches.clear();
    for (auto& [id, p] : procs) {
      if (p->reported) continue;
      close_stdin(p);  // EOF on its stdin
      kill_group(p, SIGTERM);
    }
    uv_timer_start(&kill_timer, [](uv_timer_t* t) {
      auto* me = static_cast<impl*>(t->data);
      for (auto& [id, p] : me->procs) me->kill_group(p, SIGKILL);
    }, grace_ms, 0);
    if (self->live_.load() == 0) finish_stop();
  }

  void finish_stop() {
    if (finished) return;
    finished = true;
    uv_close(reinterpret_cast<uv_handle_t*>(&kill_timer), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&async), nullptr);
  }
};

event_loop::event_loop() : impl_(std::make_unique<impl>()) {
  // Writing to a pipe whose reader died raises SIGPIPE, and writing past RLIMIT_FSIZE raises
  // SIGXFSZ; either would kill dhara. Ignored, they become EPIPE / EFBIG errors, which fail
  // closed where they happen (process-wide settings).
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  impl_->self = this;
  uv_loop_init(&impl_->loop);
  uv_async_init(&impl_->loop, &impl_->async, [](uv_async_t* h) {
    auto* me = static_cast<event_loop*>(h->data);
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> guard{me->mtx_};
      batch.swap(me->queue_);
    }
    for (auto& f : batch) f();  // async sends coalesce: drain everything
  });
  impl_->async.data = this;
  uv_timer_init(&impl_->loop, &impl_->kill_timer);
  impl_->kill_timer.data = impl_.get();
  thread_ = std::thread([this] {
    running_loop = this;
    uv_run(&impl_->loop, UV_RUN_DEFAULT);
  });
}

event_loop::~event_loop() { stop(); }

void event_loop::post(std::function<void()> f) {
  std::lock_guard<std::mutex> guard{mtx_};
  post_locked(std::move(f));
}

void event_loop::post_locked(std::function<void()> f) {
  if (stopped_) return;
  queue_.push_back(std::move(f));
  uv_async_send(&impl_->async);  // under the lock: never after the handle is closed
}

namespace {

// libuv up to 1.44 keeps, while its poll phase runs the callbacks of one epoll_wait, how many
// events that call returned in the slot after the watchers (uv__platform_invalidate_fd reads
// it there; it is null outside that phase). 1.45 moved it elsewhere: there, and anywhere but
// Linux's epoll backend, the answer is 0 (unknown).
std::size_t events_being_dispatched(const uv_loop_t& loop) {
#ifdef __linux__
  static const bool known_layout = uv_version() >= 0x010000 && uv_version() < 0x012d00;  // [1.0, 1.45)
  if (!known_layout || loop.watchers == nullptr) return 0;
  return reinterpret_cast<std::uintptr_t>(loop.watchers[loop.nwatchers + 1]);
#else
  (void)loop;
  return 0;
#endif
}

}  // namespace

std::size_t event_loop::events_in_this_dispatch() const {
  return running_loop == this ? events_being_dispatched(impl_->loop) : 0;  // the loop's own thread only
}

bool event_loop::events_waiting() const {
  // Inside the callback of the only event the loop's last look found, nothing else waited then:
  // one poll(2) fewer per round trip. What arrived since is read at the next look, a few
  // microseconds later (the caller runs a bounded amount of work before it returns).
  if (events_in_this_dispatch() == 1) return false;
  pollfd p{uv_backend_fd(&impl_->loop), POLLIN, 0};
  int n;
  do n = ::poll(&p, 1, 0);
  while (n < 0 && errno == EINTR);
  return n != 0;  // an error: say yes, and the caller leaves the work to the workers
}

std::uint64_t event_loop::spawn(spawn_request request, process_callbacks callbacks) {
  std::uint64_t id = next_id_.fetch_add(1);
  std::lock_guard<std::mutex> guard{mtx_};
  // Known before it runs: writes made meanwhile queue behind the spawn, and later ones behind them.
  if (!stopped_) stdin_.emplace(id, std::make_shared<stdin_state>());
  post_locked([this, id, r = std::move(request), c = std::move(callbacks)]() mutable {
    impl_->do_spawn(id, std::move(r), std::move(c));
  });
  return id;
}

std::shared_ptr<event_loop::stdin_state> event_loop::find_stdin(std::uint64_t id) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = stdin_.find(id);
  return it == stdin_.end() ? nullptr : it->second;
}

void event_loop::write(std::uint64_t id, std::string bytes) {
  auto in = find_stdin(id);
  if (!in) return;  // its stdin is closed (the process is gone or never started): nothing to write to
  // Held until the rest is queued, so that no later write overtakes these bytes.
  std::lock_guard<std::mutex> guard{in->lock};
  if (in->fd >= 0 && in->queued == 0) {
    // Nothing queued before these bytes: write them here. The descriptor stays open while
    // its lock is held (the loop forgets it under the same lock before closing it).
    ssize_t n;
    do n = ::write(in->fd, bytes.data(), bytes.size());
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(bytes.size())) return;
    if (n > 0) bytes.erase(0, static_cast<std::size_t>(n));
    // The pipe is full (or broken): the rest goes through the loop, which waits for room
    // (or sees the error and the exit report follows).
  }
  ++in->queued;
  in->queued_bytes += bytes.size();
  post([this, id, b = std::move(bytes)]() mutable { impl_->do_write(id, std::move(b)); });
}

std::size_t event_loop::queued_bytes(std::uint64_t id) {
  auto in = find_stdin(id);
  if (!in) return 0;
  std::lock_guard<std::mutex> guard{in->lock};
  return in->queued_bytes;
}

void event_loop::signal(std::uint64_t id, int signum) {
  post([this, id, signum] {
    if (proc* p = impl_->find(id)) impl_->kill_group(p, signum);
  });
}

void event_loop::kill_for_violation(std::uint64_t id, std::string reason) {
  post([this, id, r = std::move(reason)]() mutable {
    if (proc* p = impl_->find(id)) impl_->violation(p, std::move(r));
  });
}

void event_loop::resume_reading(std::uint64_t id) {
  post([this, id] {
    proc* p = impl_->find(id);
    if (!p || p->out_eof || p->reading) return;
    p->reading = true;
    impl::start_reading(p);
  });
}

void event_loop::watch_directory(std::string dir, std::function<void(std::string)> on_change) {
  post([this, d = std::move(dir), f = std::move(on_change)]() mutable {
    // inotify directly rather than uv_fs_event: libuv asks for IN_MODIFY, so every append to
    // a file in the folder (the audit trail lives beside permissions.json) would wake this
    // thread. A file rewritten in place is seen when its writer closes it.
    constexpr std::uint32_t mask = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE | IN_ATTRIB |
                                   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0 || ::inotify_add_watch(fd, d.c_str(), mask) < 0) {
      // Without the watch, changes made by other processes would go unseen: say so loudly.
      spdlog::error("cannot watch {} for changes: {}; permission changes need a restart", d, std::strerror(errno));
      if (fd >= 0) ::close(fd);
      return;
    }
    auto* w = new impl::watch{{}, fd, std::move(f)};
    w->handle.data = w;
    int rc = uv_poll_init(&impl_->loop, &w->handle, fd);
    if (rc < 0) {
      ::close(fd);
      delete w;
    } else if ((rc = uv_poll_start(&w->handle, UV_READABLE, impl::read_watch)) < 0) {
      impl::close_watch(w);
    }
    if (rc < 0) {
      spdlog::error("cannot watch {} for changes: {}; permission changes need a restart", d, uv_strerror(rc));
      return;
    }
    impl_->watches.push_back(w);
  });
}

void event_loop::stop(std::uint64_t grace_ms) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopped_) return;
    stopped_ = true;
    queue_.push_back([this, grace_ms] { impl_->begin_stop(grace_ms); });
    uv_async_send(&impl_->async);
  }
  if (thread_.joinable()) thread_.join();
  loop_close_rc_ = uv_loop_close(&impl_->loop);
}

}  // namespace dhara::io
