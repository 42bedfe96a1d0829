#include "net/hub_downloader.h"

#include <QCryptographicHash>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkProxyFactory>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QTimer>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/library/hub_api.h"

namespace ferry::net {
namespace {

namespace fs = std::filesystem;
using io::detail::display;
using Clock = std::chrono::steady_clock;

constexpr int kMaxRedirects = 10;
constexpr qint64 kHashChunk = 4 << 20;

[[noreturn]] void fail(ErrorCode code, const std::string& message) {
  throw Error(code, message);
}

// ---- Requests ------------------------------------------------------------------------------

bool same_origin(const QUrl& a, const QUrl& b) {
  return a.scheme() == b.scheme() && a.host() == b.host() && a.port() == b.port();
}

QNetworkRequest hub_request(const HubAccess& hub, const QUrl& url) {
  QNetworkRequest request(url);
  // Redirects are followed by hand: the token must not travel to the storage host the hub
  // redirects to, and an https address must not lead to a plain http one.
  request.setAttribute(QNetworkRequest::RedirectPolicyAttribute,
                       QNetworkRequest::ManualRedirectPolicy);
  request.setHeader(QNetworkRequest::UserAgentHeader, QByteArray("Ferry/" FERRY_VERSION));
  // The bytes as stored: with a compressed answer the Range offsets (and the partial file's
  // length) would count compressed bytes.
  request.setRawHeader("Accept-Encoding", "identity");
  if (!hub.token.isEmpty() && same_origin(url, hub.endpoint)) {
    request.setRawHeader("Authorization", "Bearer " + hub.token);
  }
  return request;
}

int status_of(QNetworkReply* reply) {
  return reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
}

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

bool is_retryable(int status) {
  return status == 0 || status == 408 || status == 429 || status >= 500;
}

// The next address of a redirect; Error(kIo) for one that leads from https to http.
QUrl redirect_target(QNetworkReply* reply, const std::string& what) {
  const QUrl location =
      reply->url().resolved(QUrl(QString::fromUtf8(reply->rawHeader("Location"))));
  if (!location.isValid() || location.isEmpty()) {
    fail(ErrorCode::kIo, what + ": the hub answered a redirect without an address");
  }
  if (reply->url().scheme() == "https" && location.scheme() != "https") {
    fail(ErrorCode::kIo, what + ": the hub redirected a secure address to an insecure one (" +
                             location.toDisplayString().toStdString() + "): refused");
  }
  return location;
}

std::string hub_page(const HubAccess& hub, const std::string& repo) {
  return hub.endpoint_text() + "/" + repo;
}

// The message for an answer that no retry can change.
std::string refusal(int status, const HubAccess& hub, const std::string& repo,
                    const std::string& what) {
  const std::string token_note =
      hub.token.isEmpty()
          ? "set HF_TOKEN to a token of that account (or log in with `huggingface-cli login`)"
          : "the token from " + hub.token_source.toStdString() +
                " was not accepted: check it belongs to that account";
  switch (status) {
    case 401:
      return what + ": the hub wants a token for " + repo +
             " (401: it is gated or private). Accept its terms on " + hub_page(hub, repo) +
             ", then " + token_note;
    case 403:
      return what + ": access to " + repo + " is refused (403). Accept the model's licence on " +
             hub_page(hub, repo) + " with your account; " + token_note;
    case 404:
      return what + ": not on the hub (404): " + repo +
             " or its revision or path has changed; the catalogue entry needs updating";
    default:
      return what + ": the hub answered " + std::to_string(status);
  }
}

std::string answer_text(QNetworkReply* reply) {
  const int status = status_of(reply);
  if (status != 0) {
    return "HTTP " + std::to_string(status) + " " +
           reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toString().toStdString();
  }
  return reply->errorString().toStdString();
}

// ---- Waiting (every wait runs the thread's event loop: a local test server shares it) ------

class Waiter {
 public:
  explicit Waiter(const std::atomic<bool>& cancelled) : cancelled_(cancelled) {}
  // Until `reply` finishes; aborted on cancel.
  void wait(QNetworkReply* reply) {
    QEventLoop loop;
    QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
      if (cancelled_.load()) reply->abort();
    });
    poll.start(50);
    if (!reply->isFinished()) loop.exec();
  }
  void pause(std::chrono::milliseconds delay) {
    QEventLoop loop;
    QTimer::singleShot(delay, &loop, &QEventLoop::quit);
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
      if (cancelled_.load()) loop.quit();
    });
    poll.start(50);
    loop.exec();
  }
  void throw_if_cancelled() const {
    if (cancelled_.load()) fail(ErrorCode::kCancelled, "the download was cancelled");
  }

 private:
  const std::atomic<bool>& cancelled_;
};

// A small answer (the tree API), redirects followed, retried like a file.
QByteArray get_small(QNetworkAccessManager& nam, const HubAccess& hub,
                     const DownloadOptions& options, Waiter& waiter, QUrl url,
                     const std::string& repo, const std::string& what) {
  int redirects = 0;
  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<QNetworkReply> reply(nam.get(hub_request(hub, url)));
    waiter.wait(reply.get());
    waiter.throw_if_cancelled();
    const int status = status_of(reply.get());
    if (is_redirect(status) && ++redirects <= kMaxRedirects) {
      url = redirect_target(reply.get(), what);
      --attempt;
      continue;
    }
    if (status == 200) {
      const QByteArray body = reply->read(library::kMaxTreeAnswerBytes + 1);
      if (static_cast<std::size_t>(body.size()) > library::kMaxTreeAnswerBytes) {
        fail(ErrorCode::kIo, what + ": the hub's answer is larger than 8 MiB");
      }
      return body;
    }
    if (!is_retryable(status)) fail(ErrorCode::kIo, refusal(status, hub, repo, what));
    if (attempt >= options.max_attempts) {
      fail(ErrorCode::kIo, what + ": no answer from " + hub.endpoint_text() + " after " +
                               std::to_string(attempt) + " tries (" + answer_text(reply.get()) +
                               ")");
    }
    waiter.pause(options.first_retry_delay * (1 << std::min(attempt - 1, 10)));
    waiter.throw_if_cancelled();
  }
}

// ---- Files ---------------------------------------------------------------------------------

fs::path note_path(const fs::path& partial) {
  fs::path note = partial;
  note += ".json";
  return note;
}

struct Note {
  std::string sha256, git_oid, etag;
  std::uint64_t size = 0;
};

std::optional<Note> read_note(const fs::path& partial) {
  QFile file(QString::fromStdString(display(note_path(partial))));
  if (!file.open(QIODevice::ReadOnly)) return std::nullopt;
  const QJsonObject o = QJsonDocument::fromJson(file.read(64 << 10)).object();
  Note note;
  note.sha256 = o.value("sha256").toString().toStdString();
  note.git_oid = o.value("git_oid").toString().toStdString();
  note.etag = o.value("etag").toString().toStdString();
  note.size = static_cast<std::uint64_t>(o.value("size").toDouble(-1));
  return note;
}

void write_note(const PlannedFile& f, const std::string& etag) {
  QJsonObject o;
  o["sha256"] = QString::fromStdString(f.sha256);
  o["git_oid"] = QString::fromStdString(f.git_oid);
  o["size"] = static_cast<double>(f.size);
  o["etag"] = QString::fromStdString(etag);
  QFile file(QString::fromStdString(display(note_path(f.partial_path))));
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      file.write(QJsonDocument(o).toJson(QJsonDocument::Compact)) < 0) {
    fail(ErrorCode::kIo, "cannot write " + display(note_path(f.partial_path)) + ": " +
                             file.errorString().toStdString());
  }
}

bool note_matches(const PlannedFile& f, const std::optional<Note>& note) {
  return note && note->sha256 == f.sha256 && note->git_oid == f.git_oid && note->size == f.size;
}

std::uint64_t file_size_or_zero(const fs::path& path) {
  std::error_code ec;
  const std::uint64_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// The running hash of a file's content: SHA-256 for LFS files, git's blob SHA-1 otherwise.
class ContentHash {
 public:
  explicit ContentHash(const PlannedFile& f)
      : lfs_(!f.sha256.empty()),
        hash_(lfs_ ? QCryptographicHash::Sha256 : QCryptographicHash::Sha1),
        size_(f.size) {
    reset();
  }
  void reset() {
    hash_.reset();
    if (!lfs_) hash_.addData(QByteArray("blob ") + QByteArray::number(size_) + '\0');
  }
  void add(QByteArrayView bytes) { hash_.addData(bytes); }
  std::string hex() const { return hash_.result().toHex().toStdString(); }
  const char* name() const { return lfs_ ? "SHA-256" : "git blob id"; }

 private:
  bool lfs_;
  QCryptographicHash hash_;
  std::uint64_t size_;
};

// Feeds `path`'s first `bytes` into `hash`. False when it cannot be read. A cancel stops it
// between chunks (a file already there may be tens of GB) with Error(kCancelled).
bool hash_file(const fs::path& path, std::uint64_t bytes, ContentHash& hash,
               const std::atomic<bool>& cancelled) {
  QFile file(QString::fromStdString(display(path)));
  if (!file.open(QIODevice::ReadOnly)) return false;
  std::uint64_t left = bytes;
  while (left > 0) {
    if (cancelled.load()) {
      fail(ErrorCode::kCancelled,
           "the download was cancelled while " + display(path) + " was being checked");
    }
    const QByteArray chunk =
        file.read(static_cast<qint64>(std::min<std::uint64_t>(left, kHashChunk)));
    if (chunk.isEmpty()) return false;
    hash.add(chunk);
    left -= static_cast<std::uint64_t>(chunk.size());
  }
  return true;
}

std::string file_what(const PlannedFile& f) {
  return f.source.repo + "/" + f.source.path;
}

// ---- One download run ----------------------------------------------------------------------

class Run {
 public:
  Run(const HubAccess& hub, const DownloadOptions& options, const std::atomic<bool>& cancelled,
      const DownloadPlan& plan, const std::function<void(const DownloadProgress&)>& progress)
      : hub_(hub), options_(options), cancelled_(cancelled), plan_(plan), on_progress_(progress) {
    progress_.files.resize(plan.files.size());
    for (std::size_t i = 0; i < plan.files.size(); ++i) {
      progress_.files[i].total = plan.files[i].size;
      progress_.total += plan.files[i].size;
    }
  }

  void execute() {
    for (std::size_t i = 0; i < plan_.files.size(); ++i) queue_.push_back(i);
    started_ = Clock::now();
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, &context_, [this] { watch(); });
    poll.start(50);
    pump();
    if (!all_done() && !error_) loop_.exec();
    emit_progress(true);
    if (error_) throw *error_;
  }

 private:
  struct Transfer {
    std::size_t index = 0;
    const PlannedFile* file = nullptr;
    QFile out;
    std::unique_ptr<ContentHash> hash;
    std::uint64_t written = 0;
    int attempts = 0, redirects = 0;
    bool restarted = false;  // once, after a 416
    bool checked = false;    // this answer's status looked at
    int status = 0;
    QUrl url;
    QNetworkReply* reply = nullptr;
    QElapsedTimer since_byte;
    std::string etag;
  };

  bool all_done() const { return queue_.empty() && active_.empty(); }

  void pump() {
    while (!error_ && !queue_.empty() &&
           static_cast<int>(active_.size()) < std::max(1, options_.parallel_files)) {
      const std::size_t index = queue_.front();
      queue_.pop_front();
      try {
        begin(index);
      } catch (const Error& e) {
        stop(e);
      }
    }
    if ((all_done() || error_) && loop_.isRunning()) loop_.quit();
  }

  void begin(std::size_t index) {
    const PlannedFile& f = plan_.files[index];
    if (f.complete) {
      ContentHash hash(f);
      if (hash_file(f.final_path, f.size, hash, cancelled_) && hash.hex() == expected(f)) {
        mark_finished(index);
        return;
      }
      // A file of the right size but other content: fetched again, and replaced once verified.
    }
    auto t = std::make_unique<Transfer>();
    t->index = index;
    t->file = &f;
    t->hash = std::make_unique<ContentHash>(f);
    t->url = QUrl(QString::fromStdString(library::resolve_url(hub_.endpoint_text(), f.source.repo,
                                                              f.source.revision, f.source.path)));
    std::error_code ec;
    fs::create_directories(f.partial_path.parent_path(), ec);
    t->out.setFileName(QString::fromStdString(display(f.partial_path)));
    const std::optional<Note> note = read_note(f.partial_path);
    const std::uint64_t present = file_size_or_zero(f.partial_path);
    const bool resume = note_matches(f, note) && present <= f.size && present > 0 &&
                        hash_file(f.partial_path, present, *t->hash, cancelled_);
    if (!t->out.open(resume ? QIODevice::Append : QIODevice::WriteOnly | QIODevice::Truncate)) {
      fail(ErrorCode::kIo,
           "cannot write " + display(f.partial_path) + ": " + t->out.errorString().toStdString());
    }
    if (resume) {
      t->written = present;
      t->etag = note->etag;
    } else {
      t->hash->reset();
      write_note(f, "");
    }
    progress_.files[index].done = t->written;
    Transfer* raw = t.get();
    active_.push_back(std::move(t));
    if (raw->written == f.size) {
      finish(*raw);
    } else {
      send(*raw);
    }
  }

  static std::string expected(const PlannedFile& f) {
    return f.sha256.empty() ? f.git_oid : f.sha256;
  }

  void send(Transfer& t) {
    QNetworkRequest request = hub_request(hub_, t.url);
    if (t.written > 0) {
      request.setRawHeader("Range", "bytes=" + QByteArray::number(t.written) + "-");
      if (!t.etag.empty()) request.setRawHeader("If-Range", QByteArray::fromStdString(t.etag));
    }
    t.checked = false;
    t.status = 0;
    t.reply = nam_.get(request);
    t.since_byte.start();
    QNetworkReply* reply = t.reply;
    QObject::connect(reply, &QNetworkReply::readyRead, &context_, [this, &t] { on_data(t); });
    QObject::connect(reply, &QNetworkReply::finished, &context_, [this, &t] { on_finished(t); });
  }

  void restart_from_zero(Transfer& t) {
    t.out.resize(0);
    t.out.seek(0);
    t.hash->reset();
    t.written = 0;
    progress_.files[t.index].done = 0;
  }

  // The status of an answer, looked at once, before its first byte is taken.
  void check_answer(Transfer& t) {
    t.checked = true;
    t.status = status_of(t.reply);
    const QByteArray etag = t.reply->hasRawHeader("X-Linked-Etag")
                                ? t.reply->rawHeader("X-Linked-Etag")
                                : t.reply->rawHeader("ETag");
    if (t.status == 200) {
      // The whole file: the server ignored the range, or its If-Range saw another version.
      if (t.written > 0) restart_from_zero(t);
      t.etag = etag.toStdString();
      write_note(*t.file, t.etag);
    } else if (t.status == 206) {
      const QByteArray range = t.reply->rawHeader("Content-Range");  // "bytes 100-199/200"
      const qsizetype space = range.indexOf(' '), dash = range.indexOf('-');
      const bool ok = space > 0 && dash > space &&
                      range.mid(space + 1, dash - space - 1).toULongLong() == t.written;
      if (!ok) fail(ErrorCode::kIo, file_what(*t.file) + ": the hub sent another range than asked");
      if (t.etag.empty() && !etag.isEmpty()) {
        t.etag = etag.toStdString();
        write_note(*t.file, t.etag);
      }
    }
  }

  void on_data(Transfer& t) {
    if (stopping_) return;
    try {
      if (!t.checked) check_answer(t);
      take(t, t.reply->readAll());
    } catch (const Error& e) {
      stop(e);
    }
  }

  // Bytes of an answer: written and hashed when they are the file's, dropped otherwise (a
  // redirect's or an error's body).
  void take(Transfer& t, const QByteArray& data) {
    if ((t.status != 200 && t.status != 206) || data.isEmpty()) return;
    const std::uint64_t n = static_cast<std::uint64_t>(data.size());
    if (t.written + n > t.file->size) {
      remove_partial(*t.file);
      fail(ErrorCode::kBadModelFile, file_what(*t.file) + ": the hub sent more than the " +
                                         std::to_string(t.file->size) +
                                         " bytes its listing gives; the partial file was removed");
    }
    const bool injected = options_.write_fails && options_.write_fails(written_this_run_);
    if (injected || t.out.write(data) != data.size()) {
      std::error_code ec;
      const auto space = fs::space(plan_.folder, ec);
      fail(ErrorCode::kIo,
           "cannot write " + display(t.file->partial_path) + " (" +
               (injected ? std::string("no space left on device")
                         : t.out.errorString().toStdString()) +
               (ec ? std::string() : ", " + human_bytes(space.available) + " free") +
               "): free some space and run the download again, it resumes from the partial "
               "file (`ferry-cli models clean` removes the partial files)");
    }
    t.hash->add(data);
    t.written += n;
    written_this_run_ += n;
    t.since_byte.start();
    progress_.files[t.index].done = t.written;
    emit_progress(false);
  }

  void on_finished(Transfer& t) {
    if (stopping_) return;
    QNetworkReply* reply = t.reply;
    reply->deleteLater();
    try {
      if (!t.checked) check_answer(t);
      take(t, reply->readAll());
      t.reply = nullptr;
      const std::string what = file_what(*t.file);
      if (is_redirect(t.status) && reply->error() == QNetworkReply::NoError) {
        if (++t.redirects > kMaxRedirects) fail(ErrorCode::kIo, what + ": too many redirects");
        t.url = redirect_target(reply, what);
        send(t);
        return;
      }
      if (t.status == 416 && !t.restarted) {
        // The partial is no prefix of the file the hub has now: once from zero.
        t.restarted = true;
        restart_from_zero(t);
        t.etag.clear();
        send(t);
        return;
      }
      if ((t.status == 200 || t.status == 206) && reply->error() == QNetworkReply::NoError &&
          t.written == t.file->size) {
        finish(t);
        return;
      }
      if (t.status != 0 && !is_retryable(t.status) && t.status != 200 && t.status != 206) {
        fail(ErrorCode::kIo, t.status == 416
                                 ? what +
                                       ": the hub refused the range the partial file resumes "
                                       "from (416), also after starting again"
                                 : refusal(t.status, hub_, t.file->source.repo, what));
      }
      // A dropped connection, a short body, a 5xx or 429: again, from where the partial ends.
      if (++t.attempts >= options_.max_attempts) {
        fail(ErrorCode::kIo, what + ": the download failed " + std::to_string(t.attempts) +
                                 " times (" + answer_text(reply) + ", " + human_bytes(t.written) +
                                 " of " + human_bytes(t.file->size) + " kept in " +
                                 display(t.file->partial_path) + "); run it again later to resume");
      }
      const auto delay = options_.first_retry_delay * (1 << std::min(t.attempts - 1, 10));
      t.url = QUrl(QString::fromStdString(
          library::resolve_url(hub_.endpoint_text(), t.file->source.repo, t.file->source.revision,
                               t.file->source.path)));
      t.redirects = 0;
      QTimer::singleShot(delay, &context_, [this, &t] {
        if (!stopping_) send(t);
      });
    } catch (const Error& e) {
      stop(e);
    }
  }

  void finish(Transfer& t) {
    const PlannedFile& f = *t.file;
    t.out.close();
    const std::string got = t.hash->hex();
    if (got != expected(f)) {
      remove_partial(f);
      fail(ErrorCode::kBadModelFile,
           file_what(f) + " does not match the hub's " + t.hash->name() + " (expected " +
               expected(f) + ", got " + got +
               "): it was refused and its partial file removed; run the download again");
    }
    std::error_code ec;
    fs::rename(f.partial_path, f.final_path, ec);
    if (ec) {
      fail(ErrorCode::kIo, "cannot rename " + display(f.partial_path) + " to " +
                               display(f.final_path) + ": " + ec.message());
    }
    fs::remove(note_path(f.partial_path), ec);
    const std::size_t index = t.index;
    for (auto it = active_.begin(); it != active_.end(); ++it) {
      if (it->get() == &t) {
        active_.erase(it);
        break;
      }
    }
    mark_finished(index);
    pump();
  }

  void mark_finished(std::size_t index) {
    progress_.files[index].done = plan_.files[index].size;
    progress_.files[index].finished = true;
    emit_progress(true);
  }

  void remove_partial(const PlannedFile& f) {
    for (auto& t : active_) {
      if (t->file == &f) t->out.close();
    }
    std::error_code ec;
    fs::remove(f.partial_path, ec);
    fs::remove(note_path(f.partial_path), ec);
  }

  // The first error ends the run: every other transfer stops where it is, its partial kept.
  void stop(const Error& e) {
    if (!error_) error_.emplace(e);
    stopping_ = true;
    for (auto& t : active_) {
      if (t->reply != nullptr) {
        QObject::disconnect(t->reply, nullptr, &context_, nullptr);
        t->reply->abort();
        t->reply->deleteLater();
        t->reply = nullptr;
      }
      t->out.close();
    }
    if (loop_.isRunning()) loop_.quit();
  }

  void watch() {
    if (stopping_) return;
    if (cancelled_.load()) {
      stop(Error(ErrorCode::kCancelled,
                 "the download was cancelled: its partial files stay, to resume it later "
                 "(`ferry-cli models clean` removes them)"));
      return;
    }
    for (auto& t : active_) {
      if (t->reply != nullptr && t->since_byte.hasExpired(options_.stall_timeout.count())) {
        t->reply->abort();  // on_finished sees a dropped connection and retries
      }
    }
  }

  void emit_progress(bool force) {
    const auto now = Clock::now();
    if (!force && now - last_emit_ < std::chrono::milliseconds(100)) return;
    last_emit_ = now;
    progress_.done = 0;
    for (const FileProgress& f : progress_.files) progress_.done += f.done;
    // Speed over the last 5 s of samples of what this run fetched.
    samples_.emplace_back(now, written_this_run_);
    while (samples_.size() > 2 && now - samples_.front().first > std::chrono::seconds(5)) {
      samples_.pop_front();
    }
    const double seconds = std::chrono::duration<double>(now - samples_.front().first).count();
    if (seconds > 0.2) {
      progress_.bytes_per_second =
          static_cast<double>(written_this_run_ - samples_.front().second) / seconds;
      progress_.eta_seconds =
          progress_.bytes_per_second > 0
              ? static_cast<double>(progress_.total - progress_.done) / progress_.bytes_per_second
              : -1;
    }
    if (on_progress_) on_progress_(progress_);
  }

  const HubAccess& hub_;
  const DownloadOptions& options_;
  const std::atomic<bool>& cancelled_;
  const DownloadPlan& plan_;
  const std::function<void(const DownloadProgress&)>& on_progress_;
  QNetworkAccessManager nam_;
  QEventLoop loop_;
  std::deque<std::size_t> queue_;
  std::vector<std::unique_ptr<Transfer>> active_;
  std::optional<Error> error_;
  bool stopping_ = false;
  std::uint64_t written_this_run_ = 0;
  DownloadProgress progress_;
  Clock::time_point started_, last_emit_;
  std::deque<std::pair<Clock::time_point, std::uint64_t>> samples_;
  // Owns the connections of this run's replies and timers; the last member, so destroyed first:
  // no callback runs into a half-destroyed run.
  QObject context_;
};

}  // namespace

std::uint64_t DownloadPlan::total_bytes() const {
  std::uint64_t total = 0;
  for (const PlannedFile& f : files) total += f.size;
  return total;
}

std::uint64_t DownloadPlan::bytes_to_fetch() const {
  std::uint64_t total = 0;
  for (const PlannedFile& f : files) total += f.complete ? 0 : f.size - std::min(f.size, f.present);
  return total;
}

HubDownloader::HubDownloader(HubAccess hub, DownloadOptions options)
    : hub_(std::move(hub)), options_(std::move(options)) {
  if (hub_.use_system_proxy) QNetworkProxyFactory::setUseSystemConfiguration(true);
}

DownloadPlan HubDownloader::plan(const library::CatalogueVariant& variant, const fs::path& folder) {
  QNetworkAccessManager nam;
  Waiter waiter(cancelled_);
  DownloadPlan plan;
  plan.folder = folder;
  // One tree request per folder of each repository and revision.
  std::map<std::string, std::vector<library::HubFile>> listings;
  for (const library::CatalogueFile& source : variant.files) {
    const std::size_t slash = source.path.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : source.path.substr(0, slash);
    const std::string key = source.repo + "\n" + source.revision + "\n" + dir;
    if (listings.count(key) == 0) {
      const std::string url =
          library::tree_url(hub_.endpoint_text(), source.repo, source.revision, dir);
      const std::string what = "listing " + source.repo + "/" + dir + " at " + source.revision;
      const QByteArray body = get_small(nam, hub_, options_, waiter,
                                        QUrl(QString::fromStdString(url)), source.repo, what);
      listings[key] = library::parse_tree_listing(std::string_view(body.constData(), body.size()),
                                                  source.repo + " " + dir);
    }
    const std::vector<library::HubFile>& listing = listings[key];
    const auto found = std::find_if(listing.begin(), listing.end(), [&](const library::HubFile& f) {
      return f.path == source.path;
    });
    if (found == listing.end()) {
      fail(ErrorCode::kIo, source.repo + " has no file " + source.path + " at revision " +
                               source.revision + ": the catalogue entry needs updating");
    }
    PlannedFile f;
    f.source = source;
    f.size = found->size;
    f.sha256 = found->sha256;
    f.git_oid = found->git_oid;
    f.final_path = folder / source.to;
    f.partial_path = f.final_path;
    f.partial_path += ".partial";
    std::error_code ec;
    if (fs::is_regular_file(f.final_path, ec) && file_size_or_zero(f.final_path) == f.size) {
      f.complete = true;
      f.present = f.size;
    } else if (note_matches(f, read_note(f.partial_path))) {
      f.present = std::min(f.size, file_size_or_zero(f.partial_path));
    }
    plan.files.push_back(std::move(f));
  }
  return plan;
}

void HubDownloader::check_space(const DownloadPlan& plan) const {
  // The nearest folder that exists: the models folder may not be made yet.
  fs::path existing = plan.folder;
  std::error_code ec;
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path()) {
    existing = existing.parent_path();
  }
  std::uint64_t available = 0;
  if (options_.free_space) {
    available = options_.free_space(existing);
  } else {
    const fs::space_info space = fs::space(existing, ec);
    if (ec) return;  // no figure: the writes themselves will say a full disk
    available = space.available;
  }
  const std::uint64_t needed = plan.bytes_to_fetch();
  if (needed + options_.free_space_margin > available) {
    fail(ErrorCode::kIo, "the download needs " + human_bytes(needed) + " (of " +
                             human_bytes(plan.total_bytes()) + ") and " +
                             human_bytes(options_.free_space_margin) + " to spare on " +
                             display(existing) + ", which has " + human_bytes(available) +
                             " free: free some space or choose another folder (--to)");
  }
}

void HubDownloader::download(const DownloadPlan& plan,
                             const std::function<void(const DownloadProgress&)>& progress) {
  Run run(hub_, options_, cancelled_, plan, progress);
  run.execute();
}

int remove_partials(const DownloadPlan& plan) {
  int removed = 0;
  for (const PlannedFile& f : plan.files) {
    std::error_code ec;
    removed += fs::remove(f.partial_path, ec) ? 1 : 0;
    fs::remove(note_path(f.partial_path), ec);
  }
  return removed;
}

int remove_partials(const fs::path& folder) {
  std::vector<fs::path> partials;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec) || it->is_symlink(file_ec)) continue;
    const std::string name = display(it->path().filename());
    if (name.ends_with(".partial") || name.ends_with(".partial.json")) {
      partials.push_back(it->path());
    }
  }
  int removed = 0;
  for (const fs::path& p : partials) {
    std::error_code remove_ec;
    if (fs::remove(p, remove_ec) && display(p.filename()).ends_with(".partial")) ++removed;
  }
  return removed;
}

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

}  // namespace ferry::net
