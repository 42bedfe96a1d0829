// The downloader (net/hub_downloader.h) against a fake hub on the loopback address (fake_hub.h),
// covering issue 22's Must show 1-4: a small set downloaded and verified; a connection dropped
// mid-file and a killed process, both resumed from the partial file; a wrong SHA-256 refused and
// removed; 404/401/403/416/5xx said clearly with bounded retries; a full disk (the free-space
// check through its hook, and a write failure injected mid-file: no tmpfs can be mounted without
// privileges in CI); cancel leaving only resumable partials, which clean-up removes.
#include "net/hub_downloader.h"

#include <QCoreApplication>
#include <QDir>
#include <QProcess>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/net/fake_hub.h"

namespace ferry::net {
namespace {

namespace fs = std::filesystem;

QByteArray random_bytes(qsizetype n, quint32 seed) {
  QByteArray bytes(n, Qt::Uninitialized);
  QRandomGenerator generator(seed);
  for (qsizetype i = 0; i < n; ++i) bytes[i] = static_cast<char>(generator.generate() & 0xff);
  return bytes;
}

QByteArray read_all(const fs::path& path) {
  QFile file(QString::fromStdString(path.string()));
  if (!file.open(QIODevice::ReadOnly)) return {};
  return file.readAll();
}

void write_file(const QString& path, const QByteArray& bytes) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size()) qFatal("cannot write");
}

HubAccess loopback(const test::FakeHub& hub, QByteArray token = {}) {
  HubAccess access;
  access.endpoint = QUrl(hub.endpoint());
  access.token = std::move(token);
  access.token_source = "a test";
  access.use_system_proxy = false;
  return access;
}

DownloadOptions quick_options() {
  DownloadOptions o;
  o.first_retry_delay = std::chrono::milliseconds(10);
  o.max_attempts = 3;
  o.free_space_margin = 0;
  return o;
}

library::CatalogueFile file(const std::string& repo, const std::string& path,
                            const std::string& to) {
  library::CatalogueFile f;
  f.repo = repo;
  f.revision = "main";
  f.path = path;
  f.to = to;
  return f;
}

// Everything under `folder`, as relative paths.
QStringList files_under(const fs::path& folder) {
  QStringList names;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec);
       it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_regular_file())
      names.append(QString::fromStdString(fs::relative(it->path(), folder).generic_string()));
  }
  names.sort();
  return names;
}

// The ErrorCode and message a call throws.
std::pair<ErrorCode, QString> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), QString::fromStdString(e.what())};
  }
  return {ErrorCode::kInternal, "no error"};
}

constexpr qsizetype kBig = 3 << 20;  // the weights file of the tests: 3 MiB

}  // namespace

class HubDownloaderTest : public QObject {
  Q_OBJECT

 private:
  // The fake hub with one repository: a 3 MiB LFS "weights" file, a 200 KiB LFS VAE in another
  // folder, and a small config kept in git.
  void fill(test::FakeHub& hub) {
    hub.add("org/model", "split/dit.safetensors", random_bytes(kBig, 1));
    hub.add("org/model", "vae/vae.safetensors", random_bytes(200 << 10, 2));
    hub.add("org/model", "config.json", "{\"small\": true}\n", false);
  }
  library::CatalogueVariant variant() {
    library::CatalogueVariant v;
    v.precision = "bf16";
    v.files = {file("org/model", "split/dit.safetensors", "diffusion_models/dit.safetensors"),
               file("org/model", "vae/vae.safetensors", "vae/vae.safetensors"),
               file("org/model", "config.json", "config.json")};
    return v;
  }

 private slots:
  void downloadsASmallSetVerified() {
    test::FakeHub hub;
    fill(hub);
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    HubDownloader d(loopback(hub, "secret"), quick_options());
    const DownloadPlan plan = d.plan(variant(), folder);
    QCOMPARE(plan.files.size(), 3u);
    QCOMPARE(plan.files[0].size, static_cast<std::uint64_t>(kBig));
    QCOMPARE(plan.files[0].sha256.size(), 64u);
    QVERIFY(!plan.files[2].git_oid.empty());
    QCOMPARE(plan.bytes_to_fetch(), plan.total_bytes());
    d.check_space(plan);
    DownloadProgress last;
    int calls = 0;
    d.download(plan, [&](const DownloadProgress& p) {
      last = p;
      ++calls;
    });
    QCOMPARE(read_all(folder / "diffusion_models" / "dit.safetensors"), random_bytes(kBig, 1));
    QCOMPARE(read_all(folder / "vae" / "vae.safetensors"), random_bytes(200 << 10, 2));
    QCOMPARE(read_all(folder / "config.json"), QByteArray("{\"small\": true}\n"));
    QCOMPARE(files_under(folder), (QStringList{"config.json", "diffusion_models/dit.safetensors",
                                               "vae/vae.safetensors"}));
    QVERIFY(calls >= 3);
    QCOMPARE(last.done, last.total);
    QCOMPARE(last.total, plan.total_bytes());
    for (const FileProgress& f : last.files) QVERIFY(f.finished);
    // The token went to the hub, never to its storage (another origin).
    QVERIFY(hub.hub_authorizations().contains("Bearer secret"));
    for (const QString& a : hub.storage_authorizations()) QVERIFY2(a.isEmpty(), qPrintable(a));
    // Bytes as stored (no compression to throw the Range offsets off).
    for (const QString& e : hub.storage_encodings()) QCOMPARE(e, QString("identity"));
    // Downloaded again: nothing fetched, the files verified where they are.
    const DownloadPlan again = d.plan(variant(), folder);
    QCOMPARE(again.bytes_to_fetch(), 0u);
    const int requests = hub.log().size();
    d.download(again, {});
    QCOMPARE(hub.log().size(), requests);
  }

  void resumesAfterTheConnectionDropsMidFile() {
    test::FakeHub hub;
    fill(hub);
    hub.drop_after("split/dit.safetensors", kBig / 3);
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    HubDownloader d(loopback(hub), quick_options());
    d.download(d.plan(variant(), folder), {});
    QCOMPARE(read_all(folder / "diffusion_models" / "dit.safetensors"), random_bytes(kBig, 1));
    const QList<qint64> starts = hub.range_starts("split/dit.safetensors");
    // The first request from zero, every later one from where the partial ended (never from zero
    // again). Usually one retry; rarely a second (seen once in a loaded run: a retry's own
    // connection lost), within the bound of 3 attempts.
    QVERIFY2(starts.size() >= 2 && starts.size() <= 3, qPrintable(QString::number(starts.size())));
    QCOMPARE(starts[0], 0);
    QVERIFY2(starts[1] > 0 && starts[1] <= kBig / 3, qPrintable(QString::number(starts[1])));
    for (qsizetype i = 2; i < starts.size(); ++i) QVERIFY(starts[i] >= starts[1]);
  }

  // A process killed mid-file leaves its partial and note; the next run resumes from them.
  void aKilledProcessResumesOnRestart() {
    test::FakeHub hub;
    fill(hub);
    hub.throttle(16 << 10);  // 3 MiB in about a second
    QTemporaryDir dir;
    QProcess child;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("FERRY_TEST_DOWNLOAD_CHILD", hub.endpoint());
    env.insert("FERRY_TEST_DOWNLOAD_FOLDER", dir.path());
    child.setProcessEnvironment(env);
    child.start(QCoreApplication::applicationFilePath(), {});
    QVERIFY(child.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(hub.body_bytes_sent("split/dit.safetensors") > kBig / 3, 20000);
    child.kill();
    QVERIFY(child.waitForFinished());
    const fs::path folder = dir.path().toStdString();
    const fs::path partial = folder / "diffusion_models" / "dit.safetensors.partial";
    QVERIFY(fs::exists(partial));
    const auto kept = static_cast<qint64>(fs::file_size(partial));
    QVERIFY(!fs::exists(folder / "diffusion_models" / "dit.safetensors"));
    hub.throttle(0);
    HubDownloader d(loopback(hub), quick_options());
    const DownloadPlan plan = d.plan(variant(), folder);
    QCOMPARE(static_cast<qint64>(plan.files[0].present), kept);
    d.download(plan, {});
    QCOMPARE(read_all(folder / "diffusion_models" / "dit.safetensors"), random_bytes(kBig, 1));
    QCOMPARE(hub.range_starts("split/dit.safetensors").last(), kept);
  }

  void aWrongSha256IsRefusedAndRemoved() {
    test::FakeHub hub;
    fill(hub);
    QByteArray wrong = random_bytes(200 << 10, 2);
    wrong[1000] = static_cast<char>(wrong[1000] ^ 1);
    hub.serve_instead("vae/vae.safetensors", wrong);
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    library::CatalogueVariant v;
    v.files = {file("org/model", "vae/vae.safetensors", "vae/vae.safetensors")};
    HubDownloader d(loopback(hub), quick_options());
    const auto [code, message] = error_of([&] { d.download(d.plan(v, folder), {}); });
    QCOMPARE(code, ErrorCode::kBadModelFile);
    QVERIFY2(message.contains("does not match the hub's SHA-256") && message.contains("removed"),
             qPrintable(message));
    QCOMPARE(files_under(folder), QStringList());
  }

  void refusalsAreSaidAtOnceAndFailuresRetriedABoundedNumberOfTimes() {
    struct Case {
      int status, times;
      const char* says;
      int requests;  // resolve requests made
    };
    for (const Case& c :
         {Case{404, 1, "(404)", 1}, Case{401, 1, "HF_TOKEN", 1}, Case{403, 1, "licence", 1},
          Case{503, 10, "failed 3 times", 3}, Case{500, 2, "", 3}, Case{429, 1, "", 2}}) {
      test::FakeHub hub;
      fill(hub);
      hub.answer_status("config.json", c.status, c.times);
      QTemporaryDir dir;
      library::CatalogueVariant v;
      v.files = {file("org/model", "config.json", "config.json")};
      HubDownloader d(loopback(hub), quick_options());
      const auto [code, message] =
          error_of([&] { d.download(d.plan(v, dir.path().toStdString()), {}); });
      if (c.says[0] == '\0') {
        QCOMPARE(message, QString("no error"));
      } else {
        QCOMPARE(code, ErrorCode::kIo);
        QVERIFY2(message.contains(c.says) && message.contains("org/model"), qPrintable(message));
      }
      QCOMPARE(hub.resolve_requests("config.json"), c.requests);
    }
  }

  // A partial that the hub answers 416 for starts again from zero once; a second 416 is said.
  void a416RestartsOnceFromZero() {
    for (int times : {1, 2}) {
      test::FakeHub hub;
      fill(hub);
      QTemporaryDir dir;
      const fs::path folder = dir.path().toStdString();
      HubDownloader d(loopback(hub), quick_options());
      hub.drop_after("vae/vae.safetensors", 1000);
      library::CatalogueVariant v;
      v.files = {file("org/model", "vae/vae.safetensors", "vae/vae.safetensors")};
      DownloadOptions once = quick_options();
      once.max_attempts = 1;
      HubDownloader first(loopback(hub), once);
      error_of([&] { first.download(first.plan(v, folder), {}); });  // leaves a 1000-byte partial
      QCOMPARE(fs::file_size(folder / "vae" / "vae.safetensors.partial"), 1000u);
      hub.answer_status("vae/vae.safetensors", 416, times);
      const auto [code, message] = error_of([&] { d.download(d.plan(v, folder), {}); });
      if (times == 1) {
        QCOMPARE(message, QString("no error"));
        QCOMPARE(read_all(folder / "vae" / "vae.safetensors"), random_bytes(200 << 10, 2));
      } else {
        QCOMPARE(code, ErrorCode::kIo);
        QVERIFY2(message.contains("416"), qPrintable(message));
      }
    }
  }

  void theTreeApiIsRetriedAndItsRefusalsSaid() {
    test::FakeHub hub;
    fill(hub);
    hub.answer_tree_status(502, 2);
    QTemporaryDir dir;
    HubDownloader d(loopback(hub), quick_options());
    QCOMPARE(d.plan(variant(), dir.path().toStdString()).files.size(), 3u);
    hub.answer_tree_status(401, 1);
    const auto [code, message] = error_of([&] { d.plan(variant(), dir.path().toStdString()); });
    QCOMPARE(code, ErrorCode::kIo);
    QVERIFY2(message.contains("401") && message.contains("token"), qPrintable(message));
    library::CatalogueVariant v;
    v.files = {file("org/model", "split/none.safetensors", "x.safetensors")};
    const auto [code2, message2] = error_of([&] { d.plan(v, dir.path().toStdString()); });
    QVERIFY2(message2.contains("has no file split/none.safetensors"), qPrintable(message2));
  }

  void aFullDiskIsSaidBeforeStartingAndWhileWriting() {
    test::FakeHub hub;
    fill(hub);
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    DownloadOptions small = quick_options();
    small.free_space = [](const fs::path&) { return std::uint64_t{1} << 20; };
    HubDownloader checked(loopback(hub), small);
    const DownloadPlan plan = checked.plan(variant(), folder);
    const auto [code, message] = error_of([&] { checked.check_space(plan); });
    QCOMPARE(code, ErrorCode::kIo);
    QVERIFY2(message.contains("needs 3.20 MiB") && message.contains("1.00 MiB free"),
             qPrintable(message));

    // The body in small pieces, so that the failing write is one inside the first file (served
    // at once, 3 MiB can arrive in one read).
    hub.throttle(64 << 10);
    DownloadOptions full = quick_options();
    full.parallel_files = 1;
    full.write_fails = [](std::uint64_t written) { return written >= (1u << 20); };
    HubDownloader d(loopback(hub), full);
    const auto [code2, message2] = error_of([&] { d.download(d.plan(variant(), folder), {}); });
    QCOMPARE(code2, ErrorCode::kIo);
    QVERIFY2(message2.contains("no space left on device") &&
                 message2.contains("dit.safetensors.partial"),
             qPrintable(message2));
    // Nothing half-written under a final name: only the resumable partial and its note.
    QCOMPARE(files_under(folder), (QStringList{"diffusion_models/dit.safetensors.partial",
                                               "diffusion_models/dit.safetensors.partial.json"}));
  }

  void cancelLeavesOnlyResumablePartialsWhichCleanUpRemoves() {
    test::FakeHub hub;
    fill(hub);
    hub.throttle(16 << 10);
    QTemporaryDir dir;
    const fs::path folder = dir.path().toStdString();
    HubDownloader d(loopback(hub), quick_options());
    const DownloadPlan plan = d.plan(variant(), folder);
    const auto [code, message] = error_of([&] {
      d.download(plan, [&](const DownloadProgress& p) {
        if (p.done > 256 << 10) d.cancel();
      });
    });
    QCOMPARE(code, ErrorCode::kCancelled);
    for (const QString& name : files_under(folder)) {
      QVERIFY2(name.endsWith(".partial") || name.endsWith(".partial.json") ||
                   name == "config.json" || name == "vae/vae.safetensors",
               qPrintable(name));
    }
    QVERIFY(fs::exists(folder / "diffusion_models" / "dit.safetensors.partial"));
    QVERIFY(!fs::exists(folder / "diffusion_models" / "dit.safetensors"));
    QVERIFY(remove_partials(folder) >= 1);
    for (const QString& name : files_under(folder))
      QVERIFY2(!name.contains(".partial"), qPrintable(name));
  }

#ifdef FERRY_CLI
  // `ferry-cli models get` as a user runs it: a user catalogue names the fake hub's set,
  // HF_ENDPOINT points at the hub; the plan, the progress lines and the verified files; `models
  // clean`.
  void cliGetsACatalogueSetWithProgressLines() {
    test::FakeHub hub;
    fill(hub);
    hub.throttle(8 << 10);  // slow enough for a progress line a second
    QTemporaryDir data;
    QDir(data.path()).mkpath("catalogues");
    QFile catalogue(data.path() + "/catalogues/test.json");
    QVERIFY(catalogue.open(QIODevice::WriteOnly));
    // Plain strings: moc does not read raw string literals.
    catalogue.write(
        "{\"ferry_catalogue\": 1, \"models\": [{\"name\": \"fake-set\", \"title\": \"Fake set\","
        " \"family\": \"wan\", \"licence\": {\"id\": \"apache-2.0\", \"url\": "
        "\"https://example.org/l\"}, \"variants\": [{\"precision\": \"bf16\", \"files\": ["
        "{\"repo\": \"org/model\", \"path\": \"split/dit.safetensors\", \"to\": "
        "\"diffusion_models/dit.safetensors\"}, {\"repo\": \"org/model\", \"path\": "
        "\"config.json\"}]}]}]}");
    catalogue.close();
    QProcess cli;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("FERRY_DATA_DIR", data.path());
    env.insert("HF_ENDPOINT", hub.endpoint());
    env.insert("HF_TOKEN", "cli-token");
    for (const char* proxy :
         {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
      env.remove(proxy);
    }
    cli.setProcessEnvironment(env);
    cli.start(FERRY_CLI, {"models", "get", "fake-set"});
    QVERIFY(cli.waitForStarted());
    QTRY_VERIFY_WITH_TIMEOUT(cli.state() == QProcess::NotRunning, 60000);
    const QString out = QString::fromUtf8(cli.readAllStandardOutput());
    QVERIFY2(cli.exitCode() == 0, qPrintable(out + cli.readAllStandardError()));
    QVERIFY2(out.contains("total 3.00 MiB, 3.00 MiB to fetch"), qPrintable(out));
    QVERIFY2(out.contains("% ") && out.contains("/s") && out.contains("left"), qPrintable(out));
    QVERIFY2(out.contains("done diffusion_models/dit.safetensors"), qPrintable(out));
    const fs::path models = (data.path() + "/models").toStdString();
    QCOMPARE(read_all(models / "diffusion_models" / "dit.safetensors"), random_bytes(kBig, 1));
    QVERIFY(hub.hub_authorizations().contains("Bearer cli-token"));

    QFile(QString::fromStdString((models / "x.safetensors.partial").string()))
        .open(QIODevice::WriteOnly);
    cli.start(FERRY_CLI, {"models", "clean"});
    QTRY_VERIFY_WITH_TIMEOUT(cli.state() == QProcess::NotRunning, 20000);
    QVERIFY2(QString::fromUtf8(cli.readAllStandardOutput()).contains("removed 1 partial file"),
             "models clean");
    QVERIFY(!fs::exists(models / "x.safetensors.partial"));
  }
#endif

  // huggingface_hub's conventions: HF_ENDPOINT, HF_TOKEN first, else its token file under HF_HOME
  // (HF_TOKEN_PATH overriding it).
  void hubAccessFollowsTheHuggingFaceConventions() {
    QTemporaryDir home;
    write_file(home.path() + "/token", "from-file\n");
    const QByteArray saved_token = qgetenv("HF_TOKEN"), saved_home = qgetenv("HF_HOME"),
                     saved_endpoint = qgetenv("HF_ENDPOINT"), saved_path = qgetenv("HF_TOKEN_PATH");
    qunsetenv("HF_TOKEN");
    qunsetenv("HF_TOKEN_PATH");
    qputenv("HF_HOME", home.path().toUtf8());
    qputenv("HF_ENDPOINT", "https://mirror.example/");
    HubAccess access = HubAccess::from_environment();
    QCOMPARE(access.endpoint_text(), std::string("https://mirror.example"));
    QCOMPARE(access.token, QByteArray("from-file"));
    QVERIFY(access.token_source.endsWith("token"));
    qputenv("HF_TOKEN", "from-env");
    access = HubAccess::from_environment();
    QCOMPARE(access.token, QByteArray("from-env"));
    QCOMPARE(access.token_source, QString("HF_TOKEN"));
    qunsetenv("HF_TOKEN");
    qputenv("HF_TOKEN_PATH", (home.path() + "/none").toUtf8());
    QVERIFY(HubAccess::from_environment().token.isEmpty());
    for (const auto& [name, value] : {std::pair{"HF_TOKEN", saved_token},
                                      {"HF_HOME", saved_home},
                                      {"HF_ENDPOINT", saved_endpoint},
                                      {"HF_TOKEN_PATH", saved_path}}) {
      if (value.isEmpty()) {
        qunsetenv(name);
      } else {
        qputenv(name, value);
      }
    }
  }

  void progressHasSpeedAndEta() {
    test::FakeHub hub;
    fill(hub);
    hub.throttle(32 << 10);
    QTemporaryDir dir;
    HubDownloader d(loopback(hub), quick_options());
    bool saw_speed = false;
    d.download(d.plan(variant(), dir.path().toStdString()), [&](const DownloadProgress& p) {
      if (p.bytes_per_second > 0 && p.eta_seconds >= 0 && p.done < p.total) saw_speed = true;
    });
    QVERIFY(saw_speed);
  }
};

}  // namespace ferry::net

// The child of aKilledProcessResumesOnRestart: downloads the fake hub's set until it is killed.
static int run_download_child() {
  using namespace ferry;
  net::HubAccess access;
  access.endpoint = QUrl(qEnvironmentVariable("FERRY_TEST_DOWNLOAD_CHILD"));
  access.use_system_proxy = false;
  net::HubDownloader d(access, {});
  library::CatalogueVariant v;
  v.files = {net::file("org/model", "split/dit.safetensors", "diffusion_models/dit.safetensors")};
  try {
    d.download(d.plan(v, qEnvironmentVariable("FERRY_TEST_DOWNLOAD_FOLDER").toStdString()), {});
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  if (qEnvironmentVariableIsSet("FERRY_TEST_DOWNLOAD_CHILD")) return run_download_child();
  ferry::net::HubDownloaderTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "hub_downloader_test.moc"
