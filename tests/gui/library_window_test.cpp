// The model library in the main window (issue 22, Must show 6): a ComfyUI user's set spread over
// diffusion_models/, text_encoders/ and vae/ is listed ready, picked as the model (all its files,
// across folders), generates, and comes back from the history and from its clip (found below the
// library's roots); settings written with one "model_folder" still restore; the roots (Ferry's
// models folder, added folders, a ComfyUI install, the hub cache); a set that is not ready cannot
// be picked until a download (from the downloader tests' fake hub, on the loopback address)
// completes it.
#include <QComboBox>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QPushButton>
#include <QScopeGuard>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest/QtTest>
#include <algorithm>

#include "core/io/safetensors_writer.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/dit_layout.h"
#include "gui/clip_lookup.h"
#include "gui/history.h"
#include "gui/library_panel.h"
#include "gui/library_roots.h"
#include "gui/main_window.h"
#include "gui/model_panel.h"
#include "tests/gui/gui_test_support.h"
#include "tests/net/fake_hub.h"

namespace ferry::gui {
namespace {

using test::cpuMachine;
using test::demoFolder;
using test::settle;

QByteArray fixture(const char* relative) {
  QFile f(QStringLiteral(FERRY_TEST_DATA_DIR "/") + relative);
  if (!f.open(QIODevice::ReadOnly)) qFatal("missing fixture %s", relative);
  return f.readAll();
}

bool write(const QString& path, const QByteArray& bytes) {
  QDir().mkpath(QFileInfo(path).path());
  QFile f(path);
  return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

QString text(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

// The demo set's three files in a ComfyUI install at `comfy`, each in the folder ComfyUI keeps
// its kind in; the paths, diffusion model first.
QStringList splitDemoIntoComfyUi(const QString& comfy) {
  using models::wan::DemoModel;
  const QList<std::pair<std::string_view, QString>> parts = {
      {DemoModel::kDitFile, QStringLiteral("diffusion_models")},
      {DemoModel::kTextEncoderFile, QStringLiteral("text_encoders")},
      {DemoModel::kVaeFile, QStringLiteral("vae")}};
  QStringList paths;
  for (const auto& [file, folder] : parts) {
    const QString to = QStringLiteral("%1/models/%2/%3").arg(comfy, folder, text(file));
    QDir().mkpath(QFileInfo(to).path());
    if (!QFile::copy(QDir(demoFolder()).filePath(text(file)), to)) return {};
    paths << to;
  }
  return paths;
}

// A one-block TI2V-shaped DiT (48 latent channels) reading the tiny umT5's 64-wide text, header
// only (as tests/gui/library_panel_test.cpp's).
void writeHeaderOnlyDit(const QString& path) {
  models::wan::DitConfig c{"tiny", 256, 512, 1, 48, 48};
  c.text_dim = 64;
  QDir().mkpath(QFileInfo(path).path());
  io::write_safetensors(test::toPath(path), models::wan::dit_tensors(c, DType::kBF16), {}, {},
                        [](std::size_t) { return true; });
}

// The window's settings file, as the user's added library folders and the last session leave it.
QString settingsFile(const QString& data) {
  QDir().mkpath(data);
  return QDir(data).filePath(QStringLiteral("settings.ini"));
}

void keepLibraryFolder(const QString& data, const QString& folder) {
  QSettings store(settingsFile(data), QSettings::IniFormat);
  addLibraryFolder(store, folder);
  store.sync();
}

MainWindowOptions options(const QString& data) {
  MainWindowOptions o;
  o.dataFolder = data;
  o.machine = cpuMachine();
  o.firstRunCheck = false;
  o.askBeforeClosing = false;
  return o;
}

// The library's row for the set whose files include `file`.
QTreeWidgetItem* rowWith(LibraryPanel* library, const QString& file) {
  QTreeWidget* tree = library->sets();
  for (int i = 0; i < tree->topLevelItemCount(); ++i) {
    QTreeWidgetItem* row = tree->topLevelItem(i);
    if (row->data(0, Qt::UserRole + 1).toStringList().contains(file)) return row;
  }
  return nullptr;
}

QString rowsText(LibraryPanel* library) {
  QStringList rows;
  for (int i = 0; i < library->sets()->topLevelItemCount(); ++i) {
    rows << library->sets()->topLevelItem(i)->text(0);
  }
  return rows.join(QStringLiteral(" | "));
}

QStringList sorted(QStringList list) {
  list.sort();
  return list;
}

// The demo's quick settings on whatever model the window has.
void useQuickSettings(MainWindow& w) {
  GenerationSettings s = w.settings();
  s.prompt = QStringLiteral("a ferry crossing a fjord at dawn");
  s.width = 64;
  s.height = 64;
  s.frames = 5;
  s.fps = 8;
  s.steps = 2;
  s.seed = 1234;
  s.seedMode = SeedMode::kFixed;
  s.preset = QStringLiteral("cpu");
  w.applySettings(s);
}

// A user catalogue with one entry: the tiny VAE of tests/data, from the fake hub.
// (A plain literal: moc does not read raw ones.)
const char kVaeCatalogue[] =
    "{\"ferry_catalogue\": 1, \"models\": [{\"name\": \"test-wan-vae\", \"title\": \"Test Wan "
    "2.2 VAE\", \"family\": \"wan\", \"description\": \"the tiny VAE of tests/data\", "
    "\"licence\": {\"id\": \"apache-2.0\", \"url\": "
    "\"https://www.apache.org/licenses/LICENSE-2.0\"}, \"variants\": [{\"precision\": \"bf16\", "
    "\"files\": [{\"repo\": \"org/vae\", \"revision\": \"main\", \"path\": "
    "\"split_files/vae/wan2.2_vae.safetensors\", \"to\": \"vae/wan2.2_vae.safetensors\"}]}]}]}";

}  // namespace

class LibraryWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    // The machine's own hub cache stays out of the library's roots.
    qputenv("HF_HUB_CACHE", QByteArray(QDir::tempPath().toUtf8() + "/ferry-no-hub-cache"));
    demoFolder();
  }

  void a_comfyui_set_is_picked_generates_and_restores_from_history_and_clip() {
    QTemporaryDir dir;
    const QString comfy = dir.filePath(QStringLiteral("ComfyUI"));
    const QStringList files = splitDemoIntoComfyUi(comfy);
    QCOMPARE(files.size(), 3);
    const QString data = dir.filePath(QStringLiteral("data"));
    keepLibraryFolder(data, comfy);

    QString video;
    HistoryItem item;
    {
      MainWindow w(options(data));
      QVERIFY(settle(w));
      QVERIFY2(w.libraryRoots().contains(comfy), qPrintable(w.libraryRoots().join(',')));
      LibraryPanel* library = w.libraryPanel();
      QVERIFY(library != nullptr);
      QTRY_VERIFY_WITH_TIMEOUT(!library->scanning(), 30000);
      QTreeWidgetItem* row = rowWith(library, files.front());
      QVERIFY2(row != nullptr, qPrintable(rowsText(library)));
      QVERIFY2(row->text(0).endsWith(QStringLiteral("— ready")), qPrintable(row->text(0)));
      QCOMPARE(sorted(row->data(0, Qt::UserRole + 1).toStringList()), sorted(files));

      // Picked from the library window: the model is the set's three files.
      QTest::mouseClick(w.modelPanel()->libraryButton(), Qt::LeftButton);
      QVERIFY(w.libraryWindow()->isVisible());
      library->sets()->setCurrentItem(row);
      QVERIFY(library->useButton()->isEnabled());
      QTest::mouseClick(library->useButton(), Qt::LeftButton);
      QVERIFY(!w.libraryWindow()->isVisible());
      QVERIFY(w.modelPanel()->showsFiles());
      QCOMPARE(sorted(w.modelPanel()->paths()), sorted(files));
      QVERIFY(settle(w));
      QVERIFY2(w.modelPanel()->model(), qPrintable(w.modelPanel()->problem()));
      QCOMPARE(w.settings().model, w.modelPanel()->paths());

      // Generate runs on it.
      useQuickSettings(w);
      QVERIFY(settle(w));
      QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
      QSignalSpy ended(&w, &MainWindow::generationEnded);
      w.generate();
      QVERIFY(ended.wait(120000));
      video = w.lastVideo();
      QVERIFY2(QFileInfo::exists(video), qPrintable(w.lastMessage()));
      QTRY_COMPARE_WITH_TIMEOUT(w.historyPanel()->count(), 1, 30000);
      const QList<HistoryItem> items =
          HistoryStore(QDir(data).filePath(QStringLiteral("history"))).items();
      QCOMPARE(items.size(), 1);
      item = items.front();
      QCOMPARE(item.settings.model, w.modelPanel()->paths());
      QCOMPARE(item.settings.modelFiles.size(), 3);
    }

    // The history item restores the same files in a window that had another model.
    const QString data2 = dir.filePath(QStringLiteral("data2"));
    {
      MainWindow w(options(data2));
      w.modelPanel()->setFolder(demoFolder());
      QVERIFY(settle(w));
      w.restoreRun(item.settings, item.video);
      QVERIFY(settle(w));
      QCOMPARE(w.modelPanel()->paths(), item.settings.model);
      QVERIFY2(w.modelPanel()->model(), qPrintable(w.modelPanel()->problem()));
      QVERIFY2(w.generateEnabled(), qPrintable(w.generateBlockedReason()));
    }

    // The clip names file names only: found below the library's roots (the ComfyUI install the
    // user added), they become the model, across its three folders.
    const QString data3 = dir.filePath(QStringLiteral("data3"));
    keepLibraryFolder(data3, comfy);
    {
      MainWindow w(options(data3));
      QVERIFY(settle(w));
      QVERIFY(w.openVideo(video));
      QVERIFY(settle(w));
      QVERIFY2(w.lastMessage().isEmpty(), qPrintable(w.lastMessage()));
      QCOMPARE(sorted(w.modelPanel()->paths()), sorted(files));
      QVERIFY2(w.modelPanel()->model(), qPrintable(w.modelPanel()->problem()));
    }
    // Without that folder among the roots, nothing holds them.
    const QString data4 = dir.filePath(QStringLiteral("data4"));
    {
      MainWindow w(options(data4));
      QVERIFY(settle(w));
      QVERIFY(w.openVideo(video));
      QVERIFY(settle(w));
      QVERIFY(w.modelPanel()->paths().isEmpty());
      QVERIFY2(w.lastMessage().contains(text(models::wan::DemoModel::kVaeFile)),
               qPrintable(w.lastMessage()));
    }
  }

  void settings_with_one_model_folder_still_restore() {
    // As history items, the last session and clips were written before "model_paths".
    const QJsonObject old{{QStringLiteral("prompt"), QStringLiteral("a ferry at dawn")},
                          {QStringLiteral("steps"), 3},
                          {QStringLiteral("model_folder"), demoFolder()}};
    const GenerationSettings s = GenerationSettings::fromJson(old);
    QCOMPARE(s.model, QStringList{demoFolder()});
    const QJsonObject written = s.toJson();
    QVERIFY(!written.contains(QStringLiteral("model_folder")));
    QCOMPARE(written.value(QStringLiteral("model_paths")).toArray(),
             QJsonArray{QJsonValue(demoFolder())});

    // A set's files in any folders go through the JSON as they are.
    GenerationSettings set = s;
    set.model = {QStringLiteral("/c/models/diffusion_models/a.safetensors"),
                 QStringLiteral("/c/models/text_encoders/b.safetensors"),
                 QStringLiteral("/d/vae/c.safetensors")};
    QCOMPARE(GenerationSettings::fromJson(set.toJson()).model, set.model);
    QCOMPARE(GenerationSettings::fromJson(set.toJson()).toRequest(QStringLiteral("/o.mp4")).model,
             (std::vector<std::filesystem::path>{"/c/models/diffusion_models/a.safetensors",
                                                 "/c/models/text_encoders/b.safetensors",
                                                 "/d/vae/c.safetensors"}));

    // A history item written before.
    const QJsonObject oldItem{{QStringLiteral("video"), QStringLiteral("/v/x.mp4")},
                              {QStringLiteral("settings"), old}};
    const auto item = historyItemFromJson(QJsonDocument(oldItem).toJson(), QStringLiteral("1"));
    QVERIFY(item.has_value());
    QCOMPARE(item->settings.model, QStringList{demoFolder()});

    // The last session's settings, written before: the window opens on that folder's model.
    QTemporaryDir dir;
    {
      QSettings store(settingsFile(dir.path()), QSettings::IniFormat);
      store.setValue(QStringLiteral("last/settings"),
                     QJsonDocument(old).toJson(QJsonDocument::Compact));
      store.sync();
    }
    MainWindow w(options(dir.path()));
    QVERIFY(settle(w));
    QCOMPARE(w.modelPanel()->paths(), QStringList{demoFolder()});
    QVERIFY(!w.modelPanel()->showsFiles());
    QVERIFY2(w.modelPanel()->model(), qPrintable(w.modelPanel()->problem()));
    QCOMPARE(w.settings().prompt, QStringLiteral("a ferry at dawn"));
    QCOMPARE(w.settings().steps, 3);
  }

  void the_roots_are_the_models_folder_the_added_folders_a_comfyui_install_and_the_hub_cache() {
    QTemporaryDir dir;
    const QString data = dir.filePath(QStringLiteral("data"));
    const QString models = QDir(data).filePath(QStringLiteral("models"));
    const QString added = dir.filePath(QStringLiteral("more-models"));
    const QString home = dir.filePath(QStringLiteral("home"));
    const QString comfy = home + QStringLiteral("/Documents/ComfyUI");
    const QString hubCache = dir.filePath(QStringLiteral("hf/hub"));
    for (const QString& folder : {models, added, comfy + QStringLiteral("/models/vae"),
                                  comfy + QStringLiteral("/models/diffusion_models"), hubCache,
                                  home + QStringLiteral("/ComfyUI")}) {  // no model folder in it
      QVERIFY(QDir().mkpath(folder));
    }
    const QByteArray oldHome = qgetenv("HOME");
    const QByteArray oldCache = qgetenv("HF_HUB_CACHE");
    qputenv("HOME", home.toUtf8());
    qputenv("HF_HUB_CACHE", hubCache.toUtf8());
    const auto restore = qScopeGuard([&] {
      qputenv("HOME", oldHome);
      qputenv("HF_HUB_CACHE", oldCache);
    });
    QCOMPARE(detectedComfyUiInstalls(), QStringList{comfy});
    {
      MainWindow w(options(data));
      QVERIFY(settle(w));
      QCOMPARE(w.libraryRoots(), (QStringList{models, comfy, hubCache}));
      // A folder the user adds in the library is kept for the next start.
      LibraryPanel* library = w.libraryPanel();
      QTRY_VERIFY_WITH_TIMEOUT(!library->scanning(), 30000);
      QCOMPARE(library->roots(), (QStringList{models, comfy, hubCache}));
      emit library->folderAdded(added);
    }
    MainWindow w(options(data));
    QVERIFY(settle(w));
    QCOMPARE(w.libraryRoots(), (QStringList{models, added, comfy, hubCache}));
  }

  void typing_in_the_field_after_a_set_goes_back_to_a_folder() {
    ModelPanel panel(test::session(cpuMachine()));
    panel.setPaths({QStringLiteral("/a/diffusion_models/x.safetensors"),
                    QStringLiteral("/b/vae/y.safetensors")},
                   QStringLiteral("My set"));
    QVERIFY(panel.showsFiles());
    QCOMPARE(panel.folderEdit()->text(), QStringLiteral("My set"));
    QCOMPARE(panel.paths().size(), 2);
    QVERIFY(panel.folder().isEmpty());
    panel.folderEdit()->selectAll();
    QTest::keyClicks(panel.folderEdit(), QDir::toNativeSeparators(demoFolder()));
    QVERIFY(!panel.showsFiles());
    QCOMPARE(panel.paths(), QStringList{demoFolder()});
    QTest::keyClick(panel.folderEdit(), Qt::Key_Return);
    QTRY_VERIFY_WITH_TIMEOUT(!panel.scanning(), 30000);
    QVERIFY2(panel.model(), qPrintable(panel.problem()));
  }

  void a_clips_files_below_a_library_root_are_the_files_or_their_pipeline_folder() {
    QTemporaryDir dir;
    const auto clipFiles = [](const QStringList& names) {
      QList<ClipFile> files;
      for (const QString& name : names) files << ClipFile{{}, name, 4, {}};
      return files;
    };
    // A ComfyUI install: each folder holds many models, so the files themselves are the model.
    const QString comfy = dir.filePath(QStringLiteral("ComfyUI/models"));
    const QStringList loose = {comfy + QStringLiteral("/diffusion_models/wan_a.safetensors"),
                               comfy + QStringLiteral("/text_encoders/umt5_b.safetensors"),
                               comfy + QStringLiteral("/vae/vae_c.safetensors")};
    for (const QString& file : loose) QVERIFY(write(file, "1234"));
    QVERIFY(write(comfy + QStringLiteral("/vae/other_vae.safetensors"), "1234"));
    ClipLookup found =
        lookUpClip(clipFiles({"wan_a.safetensors", "umt5_b.safetensors", "vae_c.safetensors"}), {},
                   {dir.filePath(QStringLiteral("ComfyUI"))}, {}, {});
    QVERIFY2(found.missing.isEmpty(), qPrintable(found.missing.join(',')));
    QCOMPARE(found.model, loose);

    // A diffusers pipeline in the hub cache: its folder is the model (the engine reads its
    // tokenizer and configuration too).
    const QString snapshot =
        dir.filePath(QStringLiteral("hub/models--org--wan/snapshots/0123abcd"));
    QVERIFY(write(snapshot + QStringLiteral("/model_index.json"), "{}"));
    for (const QString& file :
         {QStringLiteral("/transformer/diffusion_pytorch_model-00001-of-00002.safetensors"),
          QStringLiteral("/transformer/diffusion_pytorch_model-00002-of-00002.safetensors"),
          QStringLiteral("/text_encoder/model.safetensors"),
          QStringLiteral("/vae/diffusion_pytorch_model.safetensors")}) {
      QVERIFY(write(snapshot + file, "1234"));
    }
    found = lookUpClip(
        clipFiles({"diffusion_pytorch_model-00001-of-00002.safetensors",
                   "diffusion_pytorch_model-00002-of-00002.safetensors", "model.safetensors"}),
        {}, {dir.filePath(QStringLiteral("hub"))}, {}, {});
    QCOMPARE(found.model, QStringList{snapshot});

    // The model the user has is looked in first, and a file of another size is not the clip's.
    found = lookUpClip(clipFiles({"vae_c.safetensors"}), {{comfy + QStringLiteral("/vae")}},
                       {dir.filePath(QStringLiteral("hub"))}, {}, {});
    QCOMPARE(found.model, QStringList{comfy + QStringLiteral("/vae")});
    found = lookUpClip({ClipFile{{}, QStringLiteral("vae_c.safetensors"), 5, {}}}, {},
                       {dir.filePath(QStringLiteral("ComfyUI"))}, {}, {});
    QVERIFY(found.model.isEmpty());
    QCOMPARE(found.missing.size(), 1);
  }

  void a_set_not_ready_cannot_be_picked_until_a_download_completes_it() {
    QTemporaryDir dir;
    const QString comfy = dir.filePath(QStringLiteral("ComfyUI"));
    const QString dit = comfy + QStringLiteral("/models/diffusion_models/ti2v.safetensors");
    writeHeaderOnlyDit(dit);
    QVERIFY(write(
        comfy + QStringLiteral("/models/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors"),
        fixture("umt5/encoder/comfy_fp8_scaled.safetensors")));
    const QString data = dir.filePath(QStringLiteral("data"));
    keepLibraryFolder(data, comfy);
    // The VAE, from a user catalogue (<data>/catalogues) and the fake hub.
    const QByteArray vae = fixture("wan/vae/wan22_tiny.safetensors");
    ferry::test::FakeHub hub;
    hub.add(QStringLiteral("org/vae"), QStringLiteral("split_files/vae/wan2.2_vae.safetensors"),
            vae);
    QVERIFY(write(QDir(data).filePath(QStringLiteral("catalogues/test.json")),
                  QByteArray(kVaeCatalogue)));
    MainWindowOptions o = options(data);
    o.hubEndpoint = hub.endpoint();
    MainWindow w(o);
    QVERIFY(settle(w));
    LibraryPanel* library = w.libraryPanel();
    net::DownloadOptions download;
    download.first_retry_delay = std::chrono::milliseconds(10);
    download.free_space_margin = 0;
    library->setDownloadOptions(download);
    QTRY_VERIFY_WITH_TIMEOUT(!library->scanning(), 30000);

    // Not ready: its missing line shows, and neither the button nor a double click picks it.
    QTreeWidgetItem* row = rowWith(library, dit);
    QVERIFY2(row != nullptr, qPrintable(rowsText(library)));
    QVERIFY2(row->text(0).endsWith(QStringLiteral("— missing a Wan 2.2 VAE")),
             qPrintable(row->text(0)));
    QSignalSpy chosen(library, &LibraryPanel::setChosen);
    library->sets()->setCurrentItem(row);
    QVERIFY(!library->useButton()->isEnabled());
    QTest::mouseClick(library->useButton(), Qt::LeftButton);
    emit library->sets()->itemDoubleClicked(row, 0);
    QCOMPARE(chosen.count(), 0);
    QVERIFY(w.modelPanel()->paths().isEmpty());

    // The download puts the VAE in Ferry's models folder; the rescan makes the set ready.
    QSignalSpy finished(library, &LibraryPanel::downloadFinished);
    QSignalSpy scanned(library, &LibraryPanel::scanned);
    library->catalogueBox()->setCurrentIndex(
        library->catalogueBox()->findData(QStringLiteral("test-wan-vae")));
    QTest::mouseClick(library->downloadButton(), Qt::LeftButton);
    QVERIFY(finished.wait(30000));
    QCOMPARE(finished.at(0).at(0).toString(), QString());
    QVERIFY(scanned.wait(30000));
    const QString downloaded =
        QDir(data).filePath(QStringLiteral("models/vae/wan2.2_vae.safetensors"));
    row = rowWith(library, dit);
    QVERIFY2(row != nullptr, qPrintable(rowsText(library)));
    QVERIFY2(row->text(0).endsWith(QStringLiteral("— ready")), qPrintable(row->text(0)));
    QVERIFY(row->data(0, Qt::UserRole + 1).toStringList().contains(downloaded));
    library->sets()->setCurrentItem(row);
    QVERIFY(library->useButton()->isEnabled());
    QTest::mouseClick(library->useButton(), Qt::LeftButton);
    QCOMPARE(chosen.count(), 1);
    QVERIFY(w.modelPanel()->paths().contains(downloaded));
    QVERIFY(w.modelPanel()->paths().contains(dit));
    QVERIFY(settle(w));
    QVERIFY2(w.modelPanel()->model(), qPrintable(w.modelPanel()->problem()));
  }
};

}  // namespace ferry::gui

QTEST_MAIN(ferry::gui::LibraryWindowTest)
#include "library_window_test.moc"
