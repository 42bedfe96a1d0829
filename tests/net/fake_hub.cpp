#include "tests/net/fake_hub.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPointer>
#include <QTcpSocket>
#include <QTimer>
#include <QUrl>

namespace ferry::test {

FakeHub::FakeHub() {
  if (!hub_.listen(QHostAddress::LocalHost) || !storage_.listen(QHostAddress::LocalHost)) {
    qFatal("the fake hub cannot listen on 127.0.0.1");
  }
  serve(hub_, false);
  serve(storage_, true);
}

FakeHub::~FakeHub() = default;

QString FakeHub::endpoint() const {
  return QStringLiteral("http://127.0.0.1:%1").arg(hub_.serverPort());
}

void FakeHub::add(const QString& repo, const QString& path, QByteArray content, bool lfs) {
  File f;
  f.content = content;
  f.served = content;
  f.lfs = lfs;
  f.etag = "\"" + QCryptographicHash::hash(content, QCryptographicHash::Md5).toHex() + "\"";
  repos_[repo][path] = f;
}

void FakeHub::drop_after(const QString& path, qint64 body_bytes, int times) {
  for (int i = 0; i < times; ++i) drops_[path].append(body_bytes);
}

void FakeHub::answer_status(const QString& path, int status, int times) {
  for (int i = 0; i < times; ++i) statuses_[path].append(status);
}

void FakeHub::answer_tree_status(int status, int times) {
  for (int i = 0; i < times; ++i) tree_statuses_.append(status);
}

void FakeHub::serve_instead(const QString& path, QByteArray content) {
  for (auto& files : repos_) {
    if (files.contains(path)) files[path].served = content;
  }
}

int FakeHub::resolve_requests(const QString& path) const {
  int n = 0;
  for (const QString& line : log_)
    n += line.startsWith("hub GET ") && line.contains("/resolve/main/" + path) ? 1 : 0;
  return n;
}

QList<qint64> FakeHub::range_starts(const QString& path) const {
  return ranges_.value(path);
}

namespace {

void reply(QTcpSocket* socket, int status, const QByteArray& body,
           const QList<QPair<QByteArray, QByteArray>>& headers = {}) {
  QByteArray head = "HTTP/1.1 " + QByteArray::number(status) + " Fake\r\n";
  for (const auto& [name, value] : headers) head += name + ": " + value + "\r\n";
  head += "Content-Length: " + QByteArray::number(body.size()) + "\r\nConnection: close\r\n\r\n";
  socket->write(head + body);
  socket->disconnectFromHost();
}

}  // namespace

void FakeHub::serve(QTcpServer& server, bool storage) {
  QObject::connect(&server, &QTcpServer::newConnection, &server, [this, &server, storage] {
    while (QTcpSocket* socket = server.nextPendingConnection()) {
      auto buffer = std::make_shared<QByteArray>();
      QObject::connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
      QObject::connect(socket, &QTcpSocket::readyRead, socket, [this, socket, buffer, storage] {
        *buffer += socket->readAll();
        const qsizetype end = buffer->indexOf("\r\n\r\n");
        if (end < 0 || buffer->isEmpty()) return;
        Request r;
        const QList<QByteArray> lines = buffer->left(end).split('\n');
        buffer->clear();
        const QList<QByteArray> first = lines[0].trimmed().split(' ');
        if (first.size() < 2) return;
        r.method = first[0];
        r.path = first[1];
        for (qsizetype i = 1; i < lines.size(); ++i) {
          const qsizetype colon = lines[i].indexOf(':');
          if (colon > 0) {
            r.headers[lines[i].left(colon).trimmed().toLower()] = lines[i].mid(colon + 1).trimmed();
          }
        }
        log_.append(QString(storage ? "storage " : "hub ") + r.method + " " + r.path +
                    (r.headers.contains("range") ? " Range: " + r.headers["range"] : QByteArray()));
        (storage ? storage_auth_ : hub_auth_).append(QString(r.headers.value("authorization")));
        if (storage) {
          storage_encodings_.append(QString(r.headers.value("accept-encoding")));
          answer_storage(socket, r);
        } else {
          answer_hub(socket, r);
        }
      });
    }
  });
}

void FakeHub::answer_hub(QTcpSocket* socket, const Request& r) {
  const QString path = QUrl::fromPercentEncoding(r.path);
  if (path.startsWith("/api/models/")) {
    if (!tree_statuses_.isEmpty()) {
      reply(socket, tree_statuses_.takeFirst(), "{\"error\": \"fake\"}");
      return;
    }
    // /api/models/<owner>/<name>/tree/main[/<folder>]
    const QStringList parts = path.mid(12).split('/');
    if (parts.size() < 4 || parts[2] != "tree" || !repos_.contains(parts[0] + "/" + parts[1])) {
      reply(socket, 404, "{\"error\": \"Repository not found\"}");
      return;
    }
    const QString folder = parts.mid(4).join('/');
    QJsonArray listing;
    for (auto it = repos_[parts[0] + "/" + parts[1]].cbegin();
         it != repos_[parts[0] + "/" + parts[1]].cend(); ++it) {
      const qsizetype slash = it.key().lastIndexOf('/');
      if ((slash < 0 ? QString() : it.key().left(slash)) != folder) continue;
      const File& f = it.value();
      QJsonObject entry{{"type", "file"}, {"path", it.key()}};
      const QByteArray blob_id =
          QCryptographicHash::hash(
              "blob " + QByteArray::number(f.content.size()) + '\0' + f.content,
              QCryptographicHash::Sha1)
              .toHex();
      entry["oid"] = QString(blob_id);
      if (f.lfs) {
        entry["size"] = 134;  // the pointer's
        entry["lfs"] = QJsonObject{
            {"oid",
             QString(QCryptographicHash::hash(f.content, QCryptographicHash::Sha256).toHex())},
            {"size", f.content.size()},
            {"pointerSize", 134}};
      } else {
        entry["size"] = f.content.size();
      }
      listing.append(entry);
    }
    reply(socket, 200, QJsonDocument(listing).toJson());
    return;
  }
  // /<owner>/<name>/resolve/main/<path>
  const qsizetype at = path.indexOf("/resolve/main/");
  if (at < 0) {
    reply(socket, 404, "no such page");
    return;
  }
  const QString repo = path.mid(1, at - 1);
  const QString file = path.mid(at + 14);
  if (!statuses_.value(file).isEmpty()) {
    reply(socket, statuses_[file].takeFirst(), "{\"error\": \"fake\"}");
    return;
  }
  if (!repos_.contains(repo) || !repos_[repo].contains(file)) {
    reply(socket, 404, "{\"error\": \"Entry not found\"}");
    return;
  }
  const QByteArray location = QStringLiteral("http://127.0.0.1:%1/storage/%2/%3")
                                  .arg(storage_.serverPort())
                                  .arg(repo, file)
                                  .toUtf8();
  reply(socket, 302, "", {{"Location", location}, {"X-Linked-Etag", repos_[repo][file].etag}});
}

void FakeHub::answer_storage(QTcpSocket* socket, const Request& r) {
  const QString path = QUrl::fromPercentEncoding(r.path).mid(9);  // after "/storage/"
  const QStringList parts = path.split('/');
  const QString repo = parts.mid(0, 2).join('/');
  const QString file = parts.mid(2).join('/');
  if (!repos_.contains(repo) || !repos_[repo].contains(file)) {
    reply(socket, 404, "no such object");
    return;
  }
  const File& f = repos_[repo][file];
  qint64 start = 0;
  const QByteArray range = r.headers.value("range");
  const bool ranged = range.startsWith("bytes=") && !ignore_ranges_ &&
                      (!r.headers.contains("if-range") || r.headers["if-range"] == f.etag);
  if (range.startsWith("bytes=")) {
    ranges_[file].append(range.mid(6, range.indexOf('-') - 6).toLongLong());
  } else {
    ranges_[file].append(0);
  }
  const qint64 drop_at = drops_[file].isEmpty() ? -1 : drops_[file].takeFirst();
  if (ranged) {
    start = range.mid(6, range.indexOf('-') - 6).toLongLong();
    if (start >= f.served.size()) {
      reply(socket, 416, "", {{"Content-Range", "bytes */" + QByteArray::number(f.served.size())}});
      return;
    }
  }
  const QByteArray body = f.served.mid(start);
  QByteArray head = "HTTP/1.1 " + QByteArray(ranged ? "206 Partial Content" : "200 OK") + "\r\n";
  head += "ETag: " + f.etag + "\r\nAccept-Ranges: bytes\r\n";
  if (ranged) {
    head += "Content-Range: bytes " + QByteArray::number(start) + "-" +
            QByteArray::number(f.served.size() - 1) + "/" + QByteArray::number(f.served.size()) +
            "\r\n";
  }
  head += "Content-Length: " + QByteArray::number(body.size()) + "\r\nConnection: close\r\n\r\n";
  socket->write(head);
  send_body(socket, file, body, drop_at);
}

// The body at once or in timed chunks; cut (the connection closed) after `drop_at` bytes when it
// is not -1.
void FakeHub::send_body(QTcpSocket* socket, const QString& path, QByteArray body, qint64 drop_at) {
  const qint64 limit = drop_at >= 0 ? std::min<qint64>(drop_at, body.size()) : body.size();
  if (throttle_bytes_ <= 0) {
    socket->write(body.left(limit));
    sent_[path] += limit;
    socket->disconnectFromHost();
    return;
  }
  auto offset = std::make_shared<qint64>(0);
  auto timer = new QTimer(socket);
  QPointer<QTcpSocket> guard(socket);
  QObject::connect(timer, &QTimer::timeout, socket,
                   [this, guard, timer, offset, body, limit, path] {
                     if (!guard || guard->state() != QAbstractSocket::ConnectedState) {
                       timer->stop();
                       return;
                     }
                     const qint64 n = std::min(throttle_bytes_, limit - *offset);
                     guard->write(body.mid(*offset, n));
                     sent_[path] += n;
                     *offset += n;
                     if (*offset >= limit) {
                       timer->stop();
                       guard->disconnectFromHost();
                     }
                   });
  timer->start(5);
}

}  // namespace ferry::test
