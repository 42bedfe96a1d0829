// A local imitation of the Hugging Face hub for the downloader's tests, on 127.0.0.1, started and
// stopped by the test: the tree API (sizes, LFS SHA-256, git blob ids), file resolution by a
// redirect to a second server standing for the hub's storage (another origin: the token must not
// follow), Range, ETag and If-Range there — and the faults a test asks for: a connection dropped
// mid-file, status answers, wrong bytes, a slow body. HTTP/1.1 with one request per connection.
#pragma once

#include <QByteArray>
#include <QHash>
#include <QMap>
#include <QString>
#include <QStringList>
#include <QTcpServer>
#include <functional>
#include <memory>

namespace ferry::test {

class FakeHub {
 public:
  FakeHub();
  ~FakeHub();

  QString endpoint() const;  // "http://127.0.0.1:<port>"
  // A file of `repo` (owner/name) at revision "main": stored with LFS (its SHA-256 listed) or in
  // git (its blob id listed).
  void add(const QString& repo, const QString& path, QByteArray content, bool lfs = true);

  // Faults, by the file's path in its repository.
  void drop_after(const QString& path, qint64 body_bytes, int times = 1);
  void answer_status(const QString& path, int status, int times);  // on the resolve request
  void answer_tree_status(int status, int times);
  void serve_instead(const QString& path, QByteArray content);  // listed hash stays the real one
  void ignore_ranges(bool ignore) { ignore_ranges_ = ignore; }
  // The storage server sends bodies in chunks of `bytes` every 5 ms (0: at once).
  void throttle(qint64 bytes) { throttle_bytes_ = bytes; }

  // What was asked: "<server> GET <path> [Range: ...]" lines, in order.
  const QStringList& log() const { return log_; }
  int resolve_requests(const QString& path) const;
  // The Range starts the storage server was asked for `path` (0 for a request without one).
  QList<qint64> range_starts(const QString& path) const;
  qint64 body_bytes_sent(const QString& path) const { return sent_.value(path); }
  // Authorization headers each server saw (empty strings for requests without one).
  const QStringList& hub_authorizations() const { return hub_auth_; }
  const QStringList& storage_authorizations() const { return storage_auth_; }
  // The Accept-Encoding of each storage request.
  const QStringList& storage_encodings() const { return storage_encodings_; }

 private:
  struct File {
    QByteArray content, served;
    bool lfs = true;
    QByteArray etag;
  };
  struct Request {
    QByteArray method, path;
    QHash<QByteArray, QByteArray> headers;  // lowercase names
  };
  void serve(QTcpServer& server, bool storage);
  void answer_hub(class QTcpSocket* socket, const Request& r);
  void answer_storage(class QTcpSocket* socket, const Request& r);
  void send_body(class QTcpSocket* socket, const QString& path, QByteArray body, qint64 drop_at);

  QTcpServer hub_, storage_;
  QMap<QString, QMap<QString, File>> repos_;  // repo → path → file
  QHash<QString, QList<int>> statuses_;       // path → statuses still to answer
  QList<int> tree_statuses_;
  QHash<QString, QList<qint64>> drops_;  // path → body bytes after which to drop, per request
  QHash<QString, qint64> sent_;
  QStringList log_, hub_auth_, storage_auth_, storage_encodings_;
  QHash<QString, QList<qint64>> ranges_;
  bool ignore_ranges_ = false;
  qint64 throttle_bytes_ = 0;
};

}  // namespace ferry::test
