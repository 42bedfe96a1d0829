// The model library panel (gui/library_panel.h, issue 22 Must show 6), against the fake hub of the
// downloader's tests (tests/net/fake_hub.h) on the loopback address: a scan finds a set missing its
// VAE; the VAE's download shows progress, is cancelled (only its partial file stays), resumed (the
// hub is asked for the rest), verified; the rescan makes the set ready and selectable, and "Use
// this set" gives its files.
#include "gui/library_panel.h"

#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest/QtTest>
#include <filesystem>

#include "core/io/safetensors_writer.h"
#include "core/models/wan/dit_layout.h"
#include "tests/net/fake_hub.h"

namespace ferry::gui {
namespace {

namespace fs = std::filesystem;

QByteArray fixture(const char* relative) {
  QFile f(QStringLiteral(FERRY_TEST_DATA_DIR "/") + relative);
  if (!f.open(QIODevice::ReadOnly)) qFatal("missing fixture %s", relative);
  return f.readAll();
}

void write(const QString& path, const QByteArray& bytes) {
  QDir().mkpath(QFileInfo(path).path());
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size()) qFatal("cannot write");
}

// A one-block TI2V-shaped DiT (48 latent channels) reading the tiny umT5's 64-wide text, header
// only.
void write_dit(const fs::path& path) {
  models::wan::DitConfig c{"tiny", 256, 512, 1, 48, 48};
  c.text_dim = 64;
  fs::create_directories(path.parent_path());
  io::write_safetensors(path, models::wan::dit_tensors(c, DType::kBF16), {}, {},
                        [](std::size_t) { return true; });
}

QTreeWidgetItem* row_starting(QTreeWidget* tree, const QString& start) {
  for (int i = 0; i < tree->topLevelItemCount(); ++i) {
    if (tree->topLevelItem(i)->text(0).startsWith(start)) return tree->topLevelItem(i);
  }
  return nullptr;
}

}  // namespace

class LibraryPanelTest : public QObject {
  Q_OBJECT

 private slots:
  void scansDownloadsCancelsResumesAndOffersTheReadySet() {
    QTemporaryDir dir;
    const QString library = dir.path() + "/models";
    write_dit(fs::path(library.toStdString()) / "diffusion_models" / "ti2v.safetensors");
    write(library + "/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors",
          fixture("umt5/encoder/comfy_fp8_scaled.safetensors"));
    const QByteArray vae = fixture("wan/vae/wan22_tiny.safetensors");
    test::FakeHub hub;
    hub.add("org/vae", "split_files/vae/wan2.2_vae.safetensors", vae);
    hub.throttle(4 << 10);  // ~600 KiB in about a second: time to see progress and cancel

    library::Catalogue catalogue;
    library::CatalogueEntry entry;
    entry.name = "wan-vae";
    entry.title = "Wan 2.2 VAE";
    entry.family = "wan";
    entry.licence = {"apache-2.0", "https://www.apache.org/licenses/LICENSE-2.0", false, ""};
    library::CatalogueVariant variant;
    variant.precision = "bf16";
    variant.files = {{"org/vae", "main", "split_files/vae/wan2.2_vae.safetensors",
                      "vae/wan2.2_vae.safetensors", 0}};
    entry.variants = {variant};
    catalogue.entries = {entry};
    net::HubAccess access;
    access.endpoint = QUrl(hub.endpoint());
    access.use_system_proxy = false;

    LibraryPanel panel({library}, library, catalogue, access);
    net::DownloadOptions options;
    options.first_retry_delay = std::chrono::milliseconds(10);
    options.free_space_margin = 0;
    panel.setDownloadOptions(options);
    QSignalSpy scanned(&panel, &LibraryPanel::scanned);
    QTRY_COMPARE_WITH_TIMEOUT(scanned.count(), 1, 20000);
    QTreeWidgetItem* row = row_starting(panel.sets(), "Wan DiT 256 wide");
    QVERIFY(row != nullptr);
    QCOMPARE(row->text(0), QString("Wan DiT 256 wide, 1 blocks (bf16) — missing a Wan 2.2 VAE"));
    panel.sets()->setCurrentItem(row);
    QVERIFY(!panel.useButton()->isEnabled());  // a set that is not ready cannot be chosen

    // Download, cancelled once progress shows.
    QSignalSpy finished(&panel, &LibraryPanel::downloadFinished);
    QTest::mouseClick(panel.downloadButton(), Qt::LeftButton);
    QVERIFY(panel.downloading());
    QTRY_VERIFY_WITH_TIMEOUT(panel.totalProgress()->value() > 100, 20000);
    QVERIFY2(panel.progressText()->text().contains("/s"), qPrintable(panel.progressText()->text()));
    QVERIFY(panel.cancelButton()->isEnabled());
    QTest::mouseClick(panel.cancelButton(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 20000);
    QVERIFY2(finished.at(0).at(0).toString().contains("cancelled"),
             qPrintable(finished.at(0).at(0).toString()));
    QVERIFY(!QFile::exists(library + "/vae/wan2.2_vae.safetensors"));
    QVERIFY(QFile::exists(library + "/vae/wan2.2_vae.safetensors.partial"));
    const qint64 kept = QFileInfo(library + "/vae/wan2.2_vae.safetensors.partial").size();

    // Resumed: the hub is asked for what the partial lacks; then verified and the set ready.
    hub.throttle(64 << 10);
    QTest::mouseClick(panel.downloadButton(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 20000);
    QCOMPARE(finished.at(1).at(0).toString(), QString());
    QVERIFY(kept > 0);
    QCOMPARE(hub.range_starts("split_files/vae/wan2.2_vae.safetensors").last(), kept);
    QFile got(library + "/vae/wan2.2_vae.safetensors");
    QVERIFY(got.open(QIODevice::ReadOnly));
    QCOMPARE(got.readAll(), vae);
    QTRY_COMPARE_WITH_TIMEOUT(scanned.count(), 2, 20000);
    row = row_starting(panel.sets(), "Wan DiT 256 wide");
    QVERIFY(row != nullptr);
    QCOMPARE(row->text(0), QString("Wan DiT 256 wide, 1 blocks (bf16) — ready"));
    panel.sets()->setCurrentItem(row);
    QVERIFY(panel.useButton()->isEnabled());
    QSignalSpy chosen(&panel, &LibraryPanel::setChosen);
    QTest::mouseClick(panel.useButton(), Qt::LeftButton);
    QCOMPARE(chosen.count(), 1);
    const QStringList files = chosen.at(0).at(0).toStringList();
    QCOMPARE(files.size(), 3);
    QVERIFY(files.last().endsWith("vae/wan2.2_vae.safetensors"));
    QCOMPARE(panel.cleanUp(), 0);  // nothing partial left
  }
};

}  // namespace ferry::gui

QTEST_MAIN(ferry::gui::LibraryPanelTest)
#include "library_panel_test.moc"
