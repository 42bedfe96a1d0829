#include "gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QDateTime>
#include <QDesktopServices>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/io/crash_report.h"
#include "core/io/detail/os_file.h"
#include "core/io/user_data.h"
#include "core/media/audio.h"
#include "core/models/family.h"
#include "core/offload/planner.h"
#include "gui/advanced_box.h"
#include "gui/clip_lookup.h"
#include "gui/frame_player.h"
#include "gui/history.h"
#include "gui/job_estimate.h"
#include "gui/job_queue.h"
#include "gui/latest_query.h"
#include "gui/library_roots.h"
#include "gui/model_terms.h"
#ifdef FERRY_HAVE_NET
#include "core/library/catalogue.h"
#include "gui/library_panel.h"
#include "net/hub_access.h"
#endif
#include "gui/lora_list.h"
#include "gui/machine_check.h"
#include "gui/memory_chart.h"
#include "gui/model_panel.h"
#include "gui/preset_panel.h"
#include "gui/queue_panel.h"
#include "gui/stage_progress.h"
#include "gui/start_image_box.h"
#include "gui/video_settings_box.h"

namespace ferry::gui {
namespace {

constexpr int kPlayerMaxWidth = 1280;
// The columns' floors: with the splitter handles and margins they add up to less than 1280 px.
constexpr int kLeftColumnMinWidth = 460;
constexpr int kMiddleMinWidth = 420;
constexpr int kHistoryMinWidth = 200;

// Speed depends on the model, where it runs, the latent's size and the decoder (a draft's TAEHV
// decode takes seconds); not on the prompt or seed.
QString timingKeyOf(const models::ModelParts& model, const pipeline::RunTarget& target,
                    const pipeline::ResolvedRequest& resolved) {
  return QStringLiteral("timings/%1-%2-%3x%4x%5%6")
      .arg(QString::fromStdString(model.name()), QString::fromStdString(target.preset.name))
      .arg(resolved.width)
      .arg(resolved.height)
      .arg(resolved.frames)
      .arg(resolved.request.decoder == models::VideoDecoder::kTaehvDraft ? QStringLiteral("-draft")
                                                                         : QString());
}

}  // namespace

QString stepProgressText(const StepInfo& info) {
  const QString step = QObject::tr("step %1/%2 · %3/step · ETA %4")
                           .arg(info.step)
                           .arg(info.steps)
                           .arg(durationText(info.secondsPerStep), durationText(info.etaSeconds));
  if (info.phase.isEmpty()) return step;
  return info.phase.left(1).toUpper() + info.phase.mid(1) + QStringLiteral(" · ") + step;
}

FirstRunPlacement firstRunPlacement(const QRect& available) {
  constexpr int kMaximiseUpTo = 2200;
  if (available.width() <= kMaximiseUpTo) return {available, true};
  const QSize size(std::min(available.width(), 1920), std::min(available.height(), 1200));
  QRect geometry(QPoint(), size);
  geometry.moveCenter(available.center());
  return {geometry, false};
}

QString defaultDataFolder() {
  try {
    return QString::fromStdString(io::detail::display(io::user_data_dir()));
  } catch (const std::exception&) {
    return QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation);
  }
}

MainWindow::MainWindow(MainWindowOptions options, QWidget* parent)
    : QMainWindow(parent), options_(std::move(options)) {
  dataFolder_ = options_.dataFolder.isEmpty() ? defaultDataFolder() : options_.dataFolder;
  QDir().mkpath(dataFolder_);
  store_ = new QSettings(QDir(dataFolder_).filePath(QStringLiteral("settings.ini")),
                         QSettings::IniFormat, this);
  const QString presetProblem = openSession();
  history_ = new HistoryStore(QDir(dataFolder_).filePath(QStringLiteral("history")));
  queue_ = new JobQueue(QDir(dataFolder_).filePath(QStringLiteral("queue.json")), this);

  setWindowTitle(tr("Ferry"));
  setAcceptDrops(true);
  buildUi();
  buildMenus();

  worker_ = new GenerationWorker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.setObjectName(QStringLiteral("Ferry engine"));
  thread_.start();
  Q_ASSERT(worker_->thread() != thread());  // the engine never runs on the GUI thread
  connectWorker();

  presetPanel_->setSession(session_);
  restoreState();
  // The jobs a previous session left wait for "Run the queue": a job that crashed the app is
  // not run again unasked.
  const QString queueProblem = queue_->load();
  const QStringList problems =
      QStringList{presetProblem, queueProblem}.filter(QRegularExpression(QStringLiteral(".")));
  if (!problems.isEmpty()) showMessage(problems.join(QLatin1Char(' ')));
  setState(State::kIdle);

  if (options_.firstRunCheck && !store_->value(QStringLiteral("checkedMachine")).toBool()) {
    QMetaObject::invokeMethod(this, &MainWindow::showMachineCheck, Qt::QueuedConnection);
  }
  noticePreviousCrash();
}

// The engine: the machine probed (or the one the options describe) and the presets, the built-in
// ones and the user's. A preset of the user's that does not load leaves the built-ins, with a
// message.
QString MainWindow::openSession() {
  pipeline::SessionOptions o;
  o.machine = options_.machine;
  o.user_presets = io::detail::path_from_utf8(
      QDir(dataFolder_).filePath(QStringLiteral("presets")).toStdString());
  try {
    session_ = std::make_shared<pipeline::Session>(o);
    return {};
  } catch (const std::exception& e) {
    o.presets = offload::builtin_presets();
    session_ = std::make_shared<pipeline::Session>(o);
    return tr("A preset of yours was not loaded: %1").arg(QString::fromUtf8(e.what()));
  }
}

// The demo model streams every block from disk whatever the machine holds (it shows the disk
// path in seconds): its own session, on the same machine and presets.
std::shared_ptr<const pipeline::Session> MainWindow::sessionFor(const models::ModelParts& model) {
  return model.is_demo() ? demoSession() : session_;
}

std::shared_ptr<const pipeline::Session> MainWindow::demoSession() {
  if (!demoSession_) {
    pipeline::SessionOptions o;
    o.machine = session_->machine();
    o.presets = session_->presets();
    o.generator.stream_all = true;
    demoSession_ = std::make_shared<pipeline::Session>(o);
  }
  return demoSession_;
}

QString MainWindow::logsFolder() const {
  return QDir(dataFolder_).filePath(QStringLiteral("logs"));
}

// A crash report (io::install_crash_reporter, main.cpp) newer than the last one shown: the user
// hears once that Ferry closed unexpectedly, and where the report is.
void MainWindow::noticePreviousCrash() {
  const QString key = QStringLiteral("crashReportsSeenUntil");
  const auto report = io::newest_crash_report(
      io::detail::path_from_utf8(logsFolder().toStdString()), store_->value(key, 0).toLongLong());
  store_->setValue(key, QDateTime::currentSecsSinceEpoch());
  if (!report) return;
  showMessage(
      tr("Ferry closed unexpectedly the last time it ran. A report was saved: %1 "
         "(Help → Open the run logs).")
          .arg(QDir::toNativeSeparators(QString::fromStdString(io::detail::display(*report)))));
}

MainWindow::~MainWindow() {
  worker_->cancel();
  thread_.quit();
  thread_.wait();
  delete history_;
}

void MainWindow::buildUi() {
  // ---- left: what to make, top to bottom in the order a new user fills it in ----
  auto* left = new QWidget;
  auto* leftLayout = new QVBoxLayout(left);

  // The model first: until one is found nothing else can be checked, and the demo button beside
  // the folder is what the first start's message points at (in view at 1280×720).
  modelPanel_ = new ModelPanel(session_);
  leftLayout->addWidget(modelPanel_);

  auto* promptBox = new QWidget;
  auto* promptForm = new QVBoxLayout(promptBox);
  promptForm->setContentsMargins(0, 0, 0, 0);
  prompt_ = new QPlainTextEdit;
  prompt_->setPlaceholderText(tr("Describe the video: who, what, where, the light, the camera…"));
  prompt_->setAccessibleName(tr("Prompt"));
  prompt_->setTabChangesFocus(true);
  prompt_->setMinimumHeight(prompt_->fontMetrics().lineSpacing() * 3 + 12);
  prompt_->setMaximumHeight(prompt_->fontMetrics().lineSpacing() * 6 + 12);
  auto* promptLabel = new QLabel(tr("&Prompt"));
  promptLabel->setBuddy(prompt_);
  // A model trained on structured prompts (H3: dialogue tags) offers its template, never forces
  // it (a plain prompt works); its tooltip is the model's (updateFrameMode).
  promptTemplate_ = new QPushButton(tr("Insert template"));
  promptTemplate_->setFlat(true);
  promptTemplate_->setAccessibleName(tr("Insert the model's prompt template"));
  promptTemplate_->setVisible(false);
  negative_ = new QPlainTextEdit;
  // The model's default is shown as text to edit once a model is found (typing "blurry" adds to
  // it instead of replacing it unseen); "Reset" brings it back.
  negative_->setPlaceholderText(tr("The model's default, once a model is chosen"));
  negative_->setToolTip(tr("What the video should not look like."));
  negative_->setAccessibleName(tr("Negative prompt"));
  negative_->setTabChangesFocus(true);
  negative_->setFixedHeight(negative_->fontMetrics().lineSpacing() * 2 + 12);
  auto* negativeLabel = new QLabel(tr("&Negative prompt"));
  negativeLabel->setBuddy(negative_);
  resetNegative_ = new QPushButton(tr("Reset to default"));
  resetNegative_->setToolTip(tr("Put back the model's default negative prompt"));
  resetNegative_->setAccessibleName(tr("Reset the negative prompt"));
  resetNegative_->setFlat(true);
  resetNegative_->setEnabled(false);
  auto* negativeRow = new QHBoxLayout;
  negativeRow->addWidget(negativeLabel);
  negativeRow->addStretch();
  negativeRow->addWidget(resetNegative_);
  auto* promptRow = new QHBoxLayout;
  promptRow->addWidget(promptLabel);
  promptRow->addStretch();
  promptRow->addWidget(promptTemplate_);
  promptForm->addLayout(promptRow);
  promptForm->addWidget(prompt_, 2);
  promptForm->addLayout(negativeRow);
  promptForm->addWidget(negative_, 1);
  leftLayout->addWidget(promptBox);

  // The frames the video starts (and, for first–last-frame models, ends) on, side by side.
  auto* frames = new QHBoxLayout;
  startImage_ = new StartImageBox(StartImageBox::Frame::kStart);
  endImage_ = new StartImageBox(StartImageBox::Frame::kEnd);
  frames->addWidget(startImage_, 1);
  frames->addWidget(endImage_, 1);
  leftLayout->addLayout(frames);
  // What the filled boxes make (H3: T2VA, I2VA first or last, FL2VA).
  frameMode_ = new QLabel;
  frameMode_->setObjectName(QStringLiteral("frameMode"));
  frameMode_->setWordWrap(true);
  leftLayout->addWidget(frameMode_);

  video_ = new VideoSettingsBox;
  leftLayout->addWidget(video_);

  loraList_ = new LoraList;
  leftLayout->addWidget(loraList_);

  advanced_ = new AdvancedBox;
  leftLayout->addWidget(advanced_);
  clipQuery_ = new LatestQuery(QStringLiteral("Ferry clip lookup"), this);
  leftLayout->addStretch();

  generate_ = new QPushButton(tr("&Generate"));
  generate_->setDefault(true);
  generate_->setMinimumHeight(generate_->sizeHint().height() * 3 / 2);
  QFont bold = generate_->font();
  bold.setBold(true);
  generate_->setFont(bold);
  generate_->setToolTip(tr("Make the video (Alt+G, Ctrl+Enter)"));
  cancel_ = new QPushButton(tr("Cancel"));
  cancel_->setMinimumHeight(generate_->minimumHeight());
  cancel_->setToolTip(tr("Stop the running job (Esc). Nothing half-written is left behind."));
  // "Queue" adds the settings shown as ×N jobs, while a video is being made too.
  batch_ = new QSpinBox;
  batch_->setRange(1, 99);
  batch_->setPrefix(QStringLiteral("×"));
  batch_->setAccessibleName(tr("Jobs to queue"));
  batch_->setToolTip(
      tr("How many jobs \"Queue\" adds: seeds s, s+1, … (a new random seed "
         "each in \"random each time\" mode)"));
  batch_->setMinimumHeight(generate_->minimumHeight());
  queueButton_ = new QPushButton(tr("&Queue"));
  queueButton_->setMinimumHeight(generate_->minimumHeight());
  // A draft: the TAEHV decoder instead of the VAE, in seconds; its latents are kept for the full
  // decode from the history.
  draft_ = new QCheckBox(tr("Decode draft with TAEHV"));
  draft_->setAccessibleName(tr("Decode draft with TAEHV"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(generate_, 2);
  buttons->addWidget(batch_);
  buttons->addWidget(queueButton_, 1);
  buttons->addWidget(cancel_, 1);

  auto* leftScroll = new QScrollArea;
  leftScroll->setWidget(left);
  leftScroll->setWidgetResizable(true);
  leftScroll->setFrameShape(QFrame::NoFrame);
  leftScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  // The message, the verdict and the buttons stay in view however far the settings scroll: a
  // problem is shown next to the button it stops.
  message_ = new QLabel;
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->setStyleSheet(QStringLiteral(
      "QLabel { border: 1px solid #d9534f; border-radius: 4px; padding: 6px; color: #d9534f; }"));
  message_->setAccessibleName(tr("Message"));
  message_->hide();
  planLine_ = new QLabel;
  planLine_->setWordWrap(true);
  planLine_->setAccessibleName(tr("Memory prediction"));
  auto* leftColumn = new QWidget;
  leftColumn->setMinimumWidth(kLeftColumnMinWidth);
  auto* leftColumnLayout = new QVBoxLayout(leftColumn);
  leftColumnLayout->setContentsMargins(0, 0, 0, 0);
  leftColumnLayout->addWidget(leftScroll, 1);
  auto* footer = new QVBoxLayout;
  footer->setContentsMargins(9, 0, 9, 6);
  footer->addWidget(message_);
  footer->addWidget(planLine_);
  footer->addWidget(draft_);
  footer->addLayout(buttons);
  leftColumnLayout->addLayout(footer);

  // ---- middle: the video, and below it the memory plan beside the live charts ----
  auto* top = new QWidget;
  auto* topLayout = new QVBoxLayout(top);
  topLayout->setContentsMargins(0, 0, 0, 0);
  player_ = new FramePlayer;
  topLayout->addWidget(player_, 1);
  stageProgress_ = new StageProgress;
  topLayout->addWidget(stageProgress_);
  auto* resultRow = new QHBoxLayout;
  openFile_ = new QPushButton(tr("Play in system player"));
  openFile_->setToolTip(tr("Open the video in the system's player"));
  openFolder_ = new QPushButton(tr("Show in folder"));
  openFolder_->setToolTip(tr("Open the folder the videos are written to"));
  resultRow->addWidget(openFile_);
  resultRow->addWidget(openFolder_);
  resultRow->addStretch();
  // The animated preview: as tall as the buttons beside it, so the player keeps its room.
  animation_ = new QLabel;
  animation_->setAccessibleName(tr("Animated preview"));
  animation_->setToolTip(tr("Every frame of the estimate so far, small (TAEHV)"));
  animation_->setFixedHeight(openFile_->sizeHint().height());
  animation_->hide();
  animationTimer_ = new QTimer(this);
  animationTimer_->setInterval(125);  // 8 frames a second
  connect(animationTimer_, &QTimer::timeout, this, &MainWindow::showAnimationFrame);
  resultRow->addWidget(animation_);
  topLayout->addLayout(resultRow);

  presetPanel_ = new PresetPanel;
  vramChart_ = new MemoryChart(tr("VRAM"));
  ramChart_ = new MemoryChart(tr("Host RAM"));
  vramChart_->setAccessibleName(tr("VRAM per step"));
  ramChart_->setAccessibleName(tr("Host RAM per step"));
  if (!session_->machine().has_gpu) {
    vramChart_->setPlaceholder(tr("No NVIDIA GPU: Ferry runs on the CPU, in host RAM."));
  }
  auto* charts = new QVBoxLayout;
  charts->addWidget(vramChart_, 1);
  charts->addWidget(ramChart_, 1);
  stepTime_ = new QLabel(tr("Step time: –"));
  stepTime_->setAccessibleName(tr("Step time"));
  stepTime_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  stepTime_->setWordWrap(true);
  charts->addWidget(stepTime_);
  auto* bottom = new QWidget;
  auto* bottomLayout = new QHBoxLayout(bottom);
  bottomLayout->setContentsMargins(0, 0, 0, 0);
  bottomLayout->addWidget(presetPanel_, 1);
  bottomLayout->addLayout(charts, 1);

  middleSplitter_ = new QSplitter(Qt::Vertical);
  middleSplitter_->addWidget(top);
  middleSplitter_->addWidget(bottom);
  middleSplitter_->setStretchFactor(0, 3);
  middleSplitter_->setStretchFactor(1, 2);
  middleSplitter_->setChildrenCollapsible(false);

  // ---- right: history ----
  historyPanel_ = new HistoryPanel(history_);
  queuePanel_ = new QueuePanel(queue_);
  auto* tabs = sideTabs_ = new QTabWidget;
  tabs->addTab(historyPanel_, tr("Histor&y"));
  tabs->addTab(queuePanel_, tr("Queue"));
  const auto queueTabText = [this, tabs] {
    const int waiting = queue_->pendingCount();
    tabs->setTabText(tabs->indexOf(queuePanel_),
                     waiting > 0 ? tr("Queue (%1)").arg(waiting) : tr("Queue"));
  };
  connect(queue_, &JobQueue::changed, tabs, queueTabText);
  tabs->setMinimumWidth(kHistoryMinWidth);

  splitter_ = new QSplitter;
  splitter_->addWidget(leftColumn);
  splitter_->addWidget(middleSplitter_);
  splitter_->addWidget(tabs);
  splitter_->setStretchFactor(0, 0);
  splitter_->setStretchFactor(1, 1);
  splitter_->setStretchFactor(2, 0);
  splitter_->setChildrenCollapsible(false);
  setCentralWidget(splitter_);

  status_ = new QLabel(tr("Ready"));
  status_->setAccessibleName(tr("Progress"));
  progress_ = new QProgressBar;
  progress_->setMaximumWidth(220);
  progress_->setTextVisible(false);
  progress_->hide();
  statusBar()->addWidget(status_, 1);
  statusBar()->addPermanentWidget(progress_);

  // Tab order is creation order, which is reading order: model, prompt, negative prompt, start
  // image, video settings, LoRAs, Generate, Cancel, then the player, the preset and the history.

  connect(prompt_, &QPlainTextEdit::textChanged, this, &MainWindow::updateGenerateButton);
  connect(negative_, &QPlainTextEdit::textChanged, this, [this] {
    resetNegative_->setEnabled(!defaultNegative_.isEmpty() &&
                               negative_->toPlainText() != defaultNegative_);
  });
  connect(resetNegative_, &QPushButton::clicked, this,
          [this] { negative_->setPlainText(defaultNegative_); });
  connect(modelPanel_, &ModelPanel::modelChanged, this, &MainWindow::onModelChanged);
  connect(modelPanel_, &ModelPanel::demoRequested, this, &MainWindow::useDemoModel);
  connect(modelPanel_, &ModelPanel::libraryRequested, this, &MainWindow::showLibrary);
#ifndef FERRY_HAVE_NET
  modelPanel_->libraryButton()->hide();  // a build without the downloader has no library window
#endif
  connect(loraList_, &LoraList::lorasChanged, this, &MainWindow::updatePlanInputs);
  connect(loraList_, &LoraList::checked, this, &MainWindow::updateGenerateButton);
  connect(loraList_, &LoraList::distilledRequested, this, &MainWindow::useDistilledSampler);
  connect(loraList_, &LoraList::rejected, this, &MainWindow::showMessage);
  connect(startImage_, &StartImageBox::imageChanged, this, &MainWindow::updatePlanInputs);
  connect(startImage_, &StartImageBox::rejected, this, &MainWindow::showMessage);
  connect(endImage_, &StartImageBox::imageChanged, this, &MainWindow::updatePlanInputs);
  connect(startImage_, &StartImageBox::imageChanged, this, &MainWindow::updateFrameMode);
  connect(endImage_, &StartImageBox::imageChanged, this, &MainWindow::updateFrameMode);
  connect(promptTemplate_, &QPushButton::clicked, this, &MainWindow::insertPromptTemplate);
  updateFrameMode();  // T2VA / text to video until a box is filled
  connect(endImage_, &StartImageBox::rejected, this, &MainWindow::showMessage);
  connect(video_, &VideoSettingsBox::videoChanged, this, &MainWindow::updatePlanInputs);
  connect(video_, &VideoSettingsBox::seedCopied, this, [this](const QString& seed) {
    statusBar()->showMessage(tr("Seed %1 copied").arg(seed), 3000);
  });
  connect(presetPanel_, &PresetPanel::planChanged, this, &MainWindow::onPlanChanged);
  connect(generate_, &QPushButton::clicked, this, &MainWindow::generate);
  connect(cancel_, &QPushButton::clicked, this, &MainWindow::cancel);
  connect(queueButton_, &QPushButton::clicked, this, &MainWindow::enqueue);
  connect(queuePanel_, &QueuePanel::runRequested, this, &MainWindow::runQueue);
  connect(queuePanel_, &QueuePanel::stopRequested, this, &MainWindow::stopQueue);
  connect(openFile_, &QPushButton::clicked, this, &MainWindow::openFile);
  connect(openFolder_, &QPushButton::clicked, this, &MainWindow::openFolder);
  connect(player_, &FramePlayer::saveSoundtrackRequested, this, &MainWindow::chooseSoundtrackFile);
  connect(advanced_, &AdvancedBox::noiseChanged, this, [this] {
    // Where a restored clip's noise file is looked for next.
    if (!advanced_->noise().isEmpty()) {
      store_->setValue(QStringLiteral("advanced/noiseFolder"),
                       QFileInfo(advanced_->noise()).absolutePath());
    }
  });
  connect(historyPanel_, &HistoryPanel::restoreRequested, this,
          [this](const GenerationSettings& s, const QString& video) { restoreRun(s, video); });
  connect(historyPanel_, &HistoryPanel::openRequested, this, &MainWindow::showVideo);
  connect(historyPanel_, &HistoryPanel::fullDecodeRequested, this, &MainWindow::decodeDraft);
  connect(draft_, &QCheckBox::toggled, this, &MainWindow::updatePlanInputs);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open video…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a Ferry video"),
                                                      outputFolder(), tr("Videos (*.mp4)"));
    if (!path.isEmpty()) openVideo(path);
  });
  open->setShortcut(QKeySequence::Open);
  file->addAction(tr("Choose &output folder…"), this, [this] {
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("Folder for the videos"), outputFolder());
    if (!dir.isEmpty()) setOutputFolder(dir);
  });
  file->addAction(tr("Show output &folder"), this, &MainWindow::openFolder);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  // The shortcuts live on the menu's actions, where the menu shows them; on the button itself
  // setShortcut() would replace its Alt+G mnemonic (then typed into the prompt as a "g").
  QAction* generate = run->addAction(tr("&Generate"), this, &MainWindow::generate);
  generate->setShortcuts(
      {QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)});
  QAction* cancel = run->addAction(tr("&Cancel"), this, &MainWindow::cancel);
  cancel->setShortcut(QKeySequence(Qt::Key_Escape));
  run->addSeparator();
  run->addAction(tr("Use the &demo model"), this, &MainWindow::useDemoModel);
#ifdef FERRY_HAVE_NET
  run->addAction(tr("Model &library…"), this, &MainWindow::showLibrary);
#endif
  run->addAction(tr("Copy the &seed"), video_, &VideoSettingsBox::copySeed);
  undoAction_ = run->addAction(tr("&Undo restore"), this, &MainWindow::undoRestore);
  undoAction_->setToolTip(tr("Bring back the settings a restore replaced"));
  undoAction_->setEnabled(false);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Check this machine…"), this, &MainWindow::showMachineCheck);
  help->addAction(tr("Open the &data folder"), this,
                  [this] { QDesktopServices::openUrl(QUrl::fromLocalFile(dataFolder_)); });
  help->addAction(tr("Open the run &logs"), this, [this] {
    const QString logs = logsFolder();
    QDir().mkpath(logs);
    QDesktopServices::openUrl(QUrl::fromLocalFile(logs));
  });
  help->addAction(tr("&About Ferry"), this, [this] {
    // The installed tree keeps the licence texts in share/ferry beside bin/ (installer/).
    const QString notices =
        QDir(QCoreApplication::applicationDirPath())
            .absoluteFilePath(QStringLiteral("../share/ferry/THIRD-PARTY-NOTICES.txt"));
    QString text =
        tr("<b>Ferry %1</b><p>Videos from a prompt and an optional start image with Wan "
           "diffusion models, streaming weights from disk so they fit a laptop GPU.</p>"
           "<p>Ferry is free software under the MIT License. It uses Qt (LGPL v3), FFmpeg "
           "(LGPL v2.1 or later), NVIDIA cuBLASLt and OpenBLAS, each under its own licence.</p>")
            .arg(QStringLiteral(FERRY_VERSION));
    if (QFileInfo::exists(notices)) {
      text += tr("<p><a href=\"%1\">Third-party notices and licences</a></p>")
                  .arg(QUrl::fromLocalFile(QDir::cleanPath(notices)).toString());
    }
    QMessageBox box(QMessageBox::Information, tr("About Ferry"), text, QMessageBox::Ok, this);
    box.setTextFormat(Qt::RichText);
    box.setTextInteractionFlags(Qt::TextBrowserInteraction);
    box.setIconPixmap(windowIcon().pixmap(64, 64));
    box.exec();
  });
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::connectWorker() {
  connect(worker_, &GenerationWorker::started, this, &MainWindow::onStarted);
  connect(worker_, &GenerationWorker::stageChanged, this, &MainWindow::onStage);
  connect(worker_, &GenerationWorker::step, this, &MainWindow::onStep);
  connect(worker_, &GenerationWorker::preview, this, &MainWindow::onPreview);
  connect(worker_, &GenerationWorker::previewFrames, this, &MainWindow::onPreviewFrames);
  connect(worker_, &GenerationWorker::finished, this, &MainWindow::onFinished);
  connect(worker_, &GenerationWorker::failed, this, &MainWindow::onFailed);
  connect(worker_, &GenerationWorker::cancelled, this, &MainWindow::onCancelled);
  connect(worker_, &GenerationWorker::framesLoaded, this, &MainWindow::onFramesLoaded);
  connect(worker_, &GenerationWorker::framesFailed, this, &MainWindow::onFramesFailed);
}

// ---- settings ----

GenerationSettings MainWindow::settings() const {
  GenerationSettings s;
  s.prompt = prompt_->toPlainText();
  // The default as shown is "the model's default": the request leaves it to the engine, and a
  // restore on another model shows that model's.
  s.negativePrompt =
      negative_->toPlainText() == defaultNegative_ ? QString() : negative_->toPlainText();
  s.image = startImage_->path();
  s.endImage = endImage_->path();
  s.model = modelPanel_->paths();
  video_->fill(s);
  advanced_->fill(s);
  s.loras = loraList_->loras();
  s.preset = presetPanel_->presetName();
  s.draft = draft_->isEnabled() && draft_->isChecked();
  return s;
}

void MainWindow::applySettings(const GenerationSettings& s, const QString& clip) {
  clearMessage();
  restoreNotice_.clear();
  const QString previousNoise = advanced_->noise();
  prompt_->setPlainText(s.prompt);
  negative_->setPlainText(s.negativePrompt.isEmpty() ? defaultNegative_ : s.negativePrompt);
  // A clip names its start and end images by file name only (GenerationSettings::fromClip):
  // they are looked for beside the clip, never wherever the working folder happens to be.
  const auto restoreImage = [&](StartImageBox* box, const QString& name, const QString& what) {
    const QString image = !clip.isEmpty() && !name.isEmpty() && QFileInfo(name).isRelative()
                              ? QFileInfo(clip).dir().filePath(name)
                              : name;
    if (image.isEmpty()) {
      box->clear();
    } else if (!box->setPath(image)) {
      box->clear();
      showMessage(tr("The %1 %2 could not be restored: %3")
                      .arg(what, QDir::toNativeSeparators(image), box->error()));
    }
  };
  restoreImage(startImage_, s.image, tr("start image"));
  restoreImage(endImage_, s.endImage, tr("end image"));
  // LoRAs with a path (the history, the last session) are listed at once; a clip names its LoRAs
  // by file name only, and they are listed once found.
  const bool findLoras = std::any_of(s.loras.begin(), s.loras.end(),
                                     [](const LoraSetting& l) { return l.path.isEmpty(); });
  QStringList loraListFolders;
  for (const LoraSetting& l : loraList_->loras()) {
    if (!l.path.isEmpty()) loraListFolders << QFileInfo(l.path).absolutePath();
  }
  loraList_->setLoras(findLoras ? QList<LoraSetting>{} : s.loras);
  if (!s.modelFiles.isEmpty() || !s.noiseFile.name.isEmpty() || findLoras) {
    // A clip: where its files are on this machine is looked up on the drive, off this thread.
    const QStringList current = modelPanel_->paths();
    const QString models = QDir(dataFolder_).filePath(QStringLiteral("models"));
    const QStringList added = addedLibraryFolders(*store_);
    QStringList noiseCandidates;
    if (!s.noiseFile.name.isEmpty()) {
      noiseCandidates << s.noise;
      for (const QString& folder :
           {clip.isEmpty() ? QString() : QFileInfo(clip).absolutePath(),
            store_->value(QStringLiteral("advanced/noiseFolder")).toString(),
            previousNoise.isEmpty() ? QString() : QFileInfo(previousNoise).absolutePath()}) {
        if (!folder.isEmpty()) noiseCandidates << QDir(folder).filePath(s.noiseFile.name);
      }
    }
    clipQuery_->post([this, s, current, models, added, noiseCandidates, loraListFolders] {
      const QStringList roots = gui::libraryRoots(models, added);  // reads the drive: here
      const ClipLookup found = lookUpClip(s.modelFiles, {s.model, current}, roots, s.noiseFile,
                                          noiseCandidates, s.loras, loraListFolders);
      return std::function<void()>([this, s, found] { onClipLookedUp(s, found); });
    });
  } else if (clipQuery_->pending()) {
    clipQuery_->post([] { return std::function<void()>([] {}); });
  }
  // Settings that name no model files (the window's own) say which model to use.
  if (s.modelFiles.isEmpty() && !s.model.isEmpty() && modelPanel_->paths() != s.model) {
    keepSettingsForModel_ = true;  // the model's defaults must not overwrite what is restored
    modelPanel_->setPaths(s.model);
  }
  video_->apply(s);
  advanced_->apply(s);
  draft_->setChecked(s.draft);
  if (!s.preset.isEmpty()) presetPanel_->setPresetName(s.preset);
  updatePlanInputs();
}

// The answer for a restored clip: the model folder that holds its files (or which are missing,
// the current model kept), and its noise file (or that the seed alone will not make it again).
void MainWindow::onClipLookedUp(const GenerationSettings& s, const ClipLookup& found) {
  QStringList problems;
  QStringList notes;
  if (!s.modelFiles.isEmpty()) {
    if (!found.model.isEmpty()) {
      if (modelPanel_->paths() != found.model) {
        keepSettingsForModel_ = true;  // the model's defaults must not overwrite what is restored
        modelPanel_->setPaths(found.model);
      }
      notes << (found.model.size() == 1
                    ? tr("The clip's model files are in %1.")
                          .arg(QDir::toNativeSeparators(found.model.front()))
                    : tr("The clip's model files were found: %1.")
                          .arg(QDir::toNativeSeparators(found.model.join(QStringLiteral(", ")))));
      notes << found.warnings;
    } else if (found.searched.isEmpty()) {
      problems << tr("The clip's model (%1) was not looked for: choose the folder that holds it, "
                     "then restore again.")
                      .arg(found.missing.join(QStringLiteral(", ")));
    } else {
      problems << tr("The clip's model is not in %1: missing %2. The current model is kept; "
                     "choose the folder that holds these files, then restore again.")
                      .arg(QDir::toNativeSeparators(found.searched),
                           found.missing.join(QStringLiteral("; ")));
    }
  }
  if (!s.noiseFile.name.isEmpty()) {
    if (!found.noisePath.isEmpty()) {
      advanced_->setNoise(found.noisePath);
      advanced_->setExpanded(true);
      notes << tr("This clip's initial noise came from the file %1, not from its seed: the same "
                  "file (same fingerprint) was found at %2 and loaded under Advanced.")
                   .arg(s.noiseFile.name, QDir::toNativeSeparators(found.noisePath));
    } else {
      advanced_->setNoise(QString());
      advanced_->setExpanded(true);
      problems << tr("This clip's initial noise came from the file %1, not from its seed: the "
                     "seed alone will not reproduce it. It was not found beside the clip or "
                     "where the last noise file was loaded; load it under Advanced.")
                      .arg(s.noiseFile.name);
    }
  }
  if (!found.loras.isEmpty()) {
    QList<LoraSetting> listed;
    for (const LoraSetting& l : found.loras) {
      if (!l.path.isEmpty()) listed << l;
    }
    loraList_->setLoras(listed);
    if (!found.lorasMissing.isEmpty()) {
      problems << tr("The clip's LoRAs %1 were not found (looked for beside the LoRAs in the "
                     "list, in the model folder and its loras folder): without them the video "
                     "will differ. Add them to the LoRA list.")
                      .arg(found.lorasMissing.join(QStringLiteral(", ")));
    }
    for (const QString& warning : found.loraWarnings) {
      notes << warning.left(1).toUpper() + warning.mid(1) + QLatin1Char('.');
    }
  }
  restoreNotice_ = (problems + notes).join(QLatin1Char(' '));
  if (!problems.isEmpty()) {
    showMessage(restoreNotice_);
  } else if (!restoreNotice_.isEmpty()) {
    statusBar()->showMessage(restoreNotice_, 10000);
  }
  updatePlanInputs();
}

void MainWindow::restoreState() {
  const QByteArray geometry = store_->value(QStringLiteral("window/geometry")).toByteArray();
  placeOnShow_ = geometry.isEmpty() || !restoreGeometry(geometry);
  if (placeOnShow_) {
    // Until it is shown, a window laid out for its screen (the splitters share out that width).
    QScreen* screen = options_.screen ? options_.screen : QGuiApplication::primaryScreen();
    if (screen != nullptr) {
      setScreen(screen);
      setGeometry(firstRunPlacement(screen->availableGeometry()).geometry);
    }
  }
  if (!splitter_->restoreState(store_->value(QStringLiteral("window/splitter")).toByteArray())) {
    // The settings column takes what its inputs need (more on a wide screen), the history a
    // sixth at most; the player and the plan the rest.
    const int width = std::max(this->width(), 1280);
    const int left = std::clamp(width * 36 / 100, kLeftColumnMinWidth, 640);
    const int right = std::clamp(width / 6, kHistoryMinWidth, 320);
    splitter_->setSizes({left, std::max(kMiddleMinWidth, width - left - right), right});
  }
  if (!middleSplitter_->restoreState(
          store_->value(QStringLiteral("window/middleSplitter")).toByteArray())) {
    const int height = std::max(this->height(), 600);
    middleSplitter_->setSizes({height * 3 / 5, height * 2 / 5});
  }
  const QJsonObject last =
      QJsonDocument::fromJson(store_->value(QStringLiteral("last/settings")).toByteArray())
          .object();
  GenerationSettings s = GenerationSettings::fromJson(last);
  if (last.isEmpty()) {
    s.seedMode = SeedMode::kRandom;
    s.seed = QRandomGenerator::global()->bounded(quint64{1} << 32);
    s.preset = QStringLiteral("auto");
  }
  applySettings(s);
  if (s.model.isEmpty()) modelPanel_->setFolder(QString());
  clearMessage();
}

void MainWindow::saveState() {
  store_->setValue(QStringLiteral("window/geometry"), saveGeometry());
  store_->setValue(QStringLiteral("window/splitter"), splitter_->saveState());
  store_->setValue(QStringLiteral("window/middleSplitter"), middleSplitter_->saveState());
  store_->setValue(QStringLiteral("last/settings"),
                   QJsonDocument(settings().toJson()).toJson(QJsonDocument::Compact));
  store_->sync();
}

QString MainWindow::outputFolder() const {
  const QString fallback = QDir(dataFolder_).filePath(QStringLiteral("videos"));
  return store_->value(QStringLiteral("outputFolder"), fallback).toString();
}

void MainWindow::setOutputFolder(const QString& folder) {
  store_->setValue(QStringLiteral("outputFolder"), folder);
}

// ---- model, size, plan ----

void MainWindow::onModelChanged() {
  if (modelPanel_->scanning()) {  // the answer for the folder shown is on its way
    loraList_->setChecker({});
    presetPanel_->setModel(nullptr);
    updateGenerateButton();
    return;
  }
  const pipeline::ModelHandle& model = modelPanel_->model();
  // Every LoRA is checked again against the model found (none: nothing to check against).
  loraList_->setChecker(model ? LoraList::Checker([model](const std::filesystem::path& p) {
    return model->check_lora(p);
  })
                              : LoraList::Checker());
  const std::optional<models::RequestRules> rules =
      model ? std::optional(model->rules()) : std::nullopt;
  video_->setRules(rules, !keepSettingsForModel_);
  endImage_->setHint(endImageHint(rules));
  keepSettingsForModel_ = false;
  updateDraftBox();
  updateFrameMode();
  showLicenceNoticeIfDue();
  presetPanel_->setModel(model);
  updatePlanInputs();
}

void MainWindow::updateFrameMode() {
  const pipeline::ModelHandle& model = modelPanel_->model();
  const models::RequestRules rules = model ? model->rules() : models::RequestRules{};
  frameMode_->setText(gui::frameModeText(
      models::frame_mode(!startImage_->path().isEmpty(), !endImage_->path().isEmpty()), rules));
  promptTemplate_->setVisible(!rules.prompt_template.empty());
  promptTemplate_->setToolTip(
      QString::fromStdString(rules.prompt_template_help) +
      tr(" Inserts that structure with placeholders to replace; a plain prompt works too."));
}

QString MainWindow::frameModeText() const {
  return frameMode_->text();
}

// Once per user: weights under their own licence (H3's), and Ferry says so before using them.
// The notice does not block the window (the model panel stays usable); until it is confirmed,
// Generate says why it is off.
void MainWindow::showLicenceNoticeIfDue() {
  const std::optional<models::WeightsLicence> licence = unconfirmedLicence();
  if (!licence || licenseNotice_) return;
  auto* notice = new QMessageBox(QMessageBox::Information, licenceTitle(*licence),
                                 licenceNotice(*licence), QMessageBox::NoButton, this);
  notice->setTextFormat(Qt::RichText);
  notice->setTextInteractionFlags(Qt::TextBrowserInteraction);
  notice->addButton(tr("I understand"), QMessageBox::AcceptRole);
  notice->addButton(tr("Not now"), QMessageBox::RejectRole);
  notice->setAttribute(Qt::WA_DeleteOnClose);
  connect(notice, &QMessageBox::buttonClicked, this,
          [this, notice, key = licenceSettingsKey(*licence)](QAbstractButton* button) {
            if (notice->buttonRole(button) == QMessageBox::AcceptRole) {
              store_->setValue(key, true);
              store_->sync();
            }
            updateGenerateButton();
          });
  licenseNotice_ = notice;
  notice->open();
  updateGenerateButton();
}

// The licence of the model found, while the user has not confirmed it.
std::optional<models::WeightsLicence> MainWindow::unconfirmedLicence() const {
  const pipeline::ModelHandle& model = modelPanel_->model();
  if (!model) return std::nullopt;
  std::optional<models::WeightsLicence> licence = model->rules().weights_licence;
  if (licence && licenceConfirmed(*store_, *licence)) return std::nullopt;
  return licence;
}

void MainWindow::insertPromptTemplate() {
  const pipeline::ModelHandle& model = modelPanel_->model();
  if (!model) return;
  const QString text = QString::fromStdString(model->rules().prompt_template);
  if (prompt_->toPlainText().trimmed().isEmpty()) {
    prompt_->setPlainText(text);
  } else {  // what was typed stays, above the structure
    prompt_->setPlainText(prompt_->toPlainText().trimmed() + QStringLiteral("\n\n") + text);
  }
  prompt_->setFocus();
}

// The draft needs the model set's TAEHV decoder; without one the box says how to get it.
void MainWindow::updateDraftBox() {
  const pipeline::ModelHandle& model = modelPanel_->model();
  const models::RequestRules rules = model ? model->rules() : models::RequestRules{};
  draft_->setEnabled(rules.draft_decode);
  if (rules.draft_decode) {
    draft_->setToolTip(
        tr("Decode the video with the tiny TAEHV decoder instead of the VAE: seconds instead of "
           "minutes, softer detail. Its latents are kept beside it: \"Decode with the full VAE\" "
           "in the history makes the full video from them without denoising again."));
  } else if (!rules.preview_decoder_help.empty()) {
    draft_->setToolTip(tr("A draft needs the model's TAEHV decoder: %1.")
                           .arg(QString::fromStdString(rules.preview_decoder_help)));
  } else {
    draft_->setToolTip(tr("This model has no draft decoder."));
  }
}

void MainWindow::onPlanChanged() {
  if (const auto& resolved = presetPanel_->resolved()) {
    video_->setResolvedSize(QSize(resolved->width, resolved->height));
    if (resolved->request.negative_prompt.empty() &&
        defaultNegative_ != QString::fromStdString(resolved->negative_prompt)) {
      // Another model's default: shown in place of the old one unless the user changed it.
      const QString shown = negative_->toPlainText();
      const bool wasDefault = shown.isEmpty() || shown == defaultNegative_;
      defaultNegative_ = QString::fromStdString(resolved->negative_prompt);
      if (wasDefault) negative_->setPlainText(defaultNegative_);
      negative_->setToolTip(tr("What the video should not look like. The model's default:\n%1")
                                .arg(defaultNegative_));
      resetNegative_->setEnabled(negative_->toPlainText() != defaultNegative_);
    }
  } else {
    video_->setResolvedSize(QSize());
  }
  updateGenerateButton();
  if (state_ != State::kIdle) return;
  const auto target = presetPanel_->target();
  if (!target) return;
  ramChart_->setBudget(target->preset.ram_budget_bytes);
  vramChart_->setBudget(
      target->on_gpu ? offload::usable_device_bytes(target->preset, session_->machine()) : 0);
}

// The request the preset panel validates and plans: what Generate would run, with a stand-in
// prompt (an empty one is the window's own message) and output.
void MainWindow::updatePlanInputs() {
  GenerationSettings s = settings();
  if (s.prompt.trimmed().isEmpty()) s.prompt = QStringLiteral("plan");
  presetPanel_->setRequest(
      s.toRequest(QDir(QDir::tempPath()).filePath(QStringLiteral("ferry-plan.mp4"))));
  updateGenerateButton();
}

bool MainWindow::settled() const {
  return !clipQuery_->pending() && !modelPanel_->scanning() && !loraList_->checking() &&
         !presetPanel_->planning();
}

QString MainWindow::generateBlockedReason() const {
  if (state_ != State::kIdle) return tr("A video is being made.");
  return inputsBlockedReason();
}

QString MainWindow::queueBlockedReason() const {
  return inputsBlockedReason();
}

bool MainWindow::queueEnabled() const {
  return queueButton_->isEnabled();
}

QString MainWindow::inputsBlockedReason() const {
  if (clipQuery_->pending()) return tr("Looking for the clip's model files…");
  if (modelPanel_->scanning()) return tr("Looking for the model…");
  if (!modelPanel_->model()) return modelPanel_->problem();
  if (const auto licence = unconfirmedLicence()) return licenceBlockedReason(*licence);
  if (loraList_->checking()) return tr("Checking the LoRAs…");
  if (const QString lora = loraList_->problem(); !lora.isEmpty()) return lora;
  if (presetPanel_->planning()) return tr("Planning the memory…");
  if (!presetPanel_->fits()) return presetPanel_->refusal();
  return {};
}

bool MainWindow::generateEnabled() const {
  return generate_->isEnabled();
}

void MainWindow::updateGenerateButton() {
  const QString reason = generateBlockedReason();
  generate_->setEnabled(reason.isEmpty());
  generate_->setToolTip(reason.isEmpty() ? tr("Make the video (Ctrl+Enter)") : reason);
  generate_->setAccessibleDescription(reason);
  updateQueueButton();
  const auto& plan = presetPanel_->plan();
  const bool modelMissing = !reason.isEmpty() && reason == modelPanel_->problem() &&
                            !modelPanel_->scanning() && !modelPanel_->model();
  if (presetPanel_->fits() && plan) {
    planLine_->setStyleSheet(QString());
    const auto target = presetPanel_->target();
    QString preset = presetPanel_->presetName();
    if (target && target->fell_back_to_cpu) {
      preset = tr("%1 (no NVIDIA GPU)").arg(QString::fromStdString(target->preset.name));
    }
    QString text = tr("Preset %1 · predicted peaks: VRAM %2 · RAM %3")
                       .arg(preset, MemoryChart::formatBytes(plan->predicted_vram_peak),
                            MemoryChart::formatBytes(plan->predicted_ram_peak));
    // What the engine allows but doubts (a distillation LoRA with CFG on or 50 steps): in view
    // beside the buttons, before the run.
    if (const auto& resolved = presetPanel_->resolved(); resolved && !resolved->warnings.empty()) {
      for (const std::string& warning : resolved->warnings) {
        text += QStringLiteral("\n⚠ ") + QString::fromStdString(warning);
      }
      planLine_->setStyleSheet(QStringLiteral("color: #b8860b;"));
    }
    planLine_->setText(text);
  } else if (modelMissing) {
    // Said once, by the model panel at the top (in view at 1280×720), not again here.
    planLine_->clear();
  } else {
    planLine_->setStyleSheet(QStringLiteral("color: #d9534f;"));
    planLine_->setText(QStringLiteral("⚠ ") + reason);
  }
  planLine_->setVisible(!planLine_->text().isEmpty());
  if (state_ == State::kIdle && modelMissing) {
    status_->setText(tr("Not ready: choose a model at the top"));
  } else if (state_ == State::kIdle && !reason.isEmpty()) {
    status_->setText(tr("Not ready (the reason is above the Generate button)"));
  } else if (state_ == State::kIdle) {
    status_->setText(tr("Ready"));
  }
}

// ---- running ----

void MainWindow::generate() {
  if (state_ != State::kIdle) return;
  clearMessage();
  const QString blocked = generateBlockedReason();
  if (!blocked.isEmpty()) {
    // Already in view, in the line above the button: said once, not again in a banner.
    lastMessage_ = blocked;
    return;
  }
  if (prompt_->toPlainText().trimmed().isEmpty()) {
    showMessage(tr("The prompt is empty: describe the video to make."));
    prompt_->setFocus();
    return;
  }
  if (video_->seedMode() == SeedMode::kRandom) {
    video_->setSeed(QRandomGenerator::global()->bounded(quint64{1} << 32));
  }
  const QString output = newOutputPath();
  if (output.isEmpty()) return;
  const GenerationSettings s = settings();
  GenerationJob job;
  job.request = s.toRequest(output);
  job.model = modelPanel_->model();  // what the plan shown was made for
  job.session = sessionFor(*job.model);
  const auto& plan = presetPanel_->plan();
  const auto& resolved = presetPanel_->resolved();
  currentJob_.clear();
  launch(job, s, plan ? &*plan : nullptr, resolved ? resolved->steps : s.steps, timingKey());
}

QString MainWindow::newOutputPath() {
  const QString folder = outputFolder();
  if (!QDir().mkpath(folder)) {
    showMessage(tr("The output folder %1 cannot be created. Choose another one in the File "
                   "menu.")
                    .arg(QDir::toNativeSeparators(folder)));
    return {};
  }
  QString output = QDir(folder).filePath(
      QStringLiteral("ferry-%1.mp4")
          .arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"))));
  for (int n = 2; QFileInfo::exists(output); ++n) {
    output = QDir(folder).filePath(
        QStringLiteral("ferry-%1-%2.mp4")
            .arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")))
            .arg(n));
  }
  return output;
}

void MainWindow::launch(GenerationJob job, const GenerationSettings& settings,
                        const models::GenerationPlan* plan, int steps, const QString& timingKey) {
  runSettings_ = settings;
  job.logFolder = io::detail::path_from_utf8(logsFolder().toStdString());
  vramChart_->clear();
  ramChart_->clear();
  stepTime_->setText(tr("Step time: –"));
  startStageProgress(plan, steps, timingKey);
  lastPreview_ = {};
  runDraftOf_.clear();
  // Without a TAEHV decoder the previews are a colour sketch of the latent: said under it, with
  // how to get real pictures.
  previewCaption_ = tr("preview");
  if (job.model) {
    const models::RequestRules rules = job.model->rules();
    if (!rules.draft_decode && !rules.preview_decoder_help.empty()) {
      previewCaption_ = tr("preview: a colour sketch of the latent. For real pictures, %1")
                            .arg(QString::fromStdString(rules.preview_decoder_help));
    }
  }
  setState(State::kRunning);
  statusBar()->clearMessage();  // the progress label underneath must show
  setProgressText(tr("Starting…"), QString());
  worker_->prepare();
  QMetaObject::invokeMethod(
      worker_, [worker = worker_, job] { worker->generate(job); }, Qt::QueuedConnection);
}

// ---- the queue ----

void MainWindow::enqueue() {
  const QString blocked = queueBlockedReason();
  if (!blocked.isEmpty()) {
    lastMessage_ = blocked;  // in view above the buttons already
    return;
  }
  if (prompt_->toPlainText().trimmed().isEmpty()) {
    showMessage(tr("The prompt is empty: describe the video to make."));
    prompt_->setFocus();
    return;
  }
  clearMessage();
  const GenerationSettings shown = settings();
  const int count = batch_->value();
  const bool random = shown.seedMode == SeedMode::kRandom;
  for (int i = 0; i < count; ++i) {
    GenerationSettings job = shown;
    // Each job's seed is decided now and said in its row: the queue makes what it shows.
    job.seedMode = SeedMode::kFixed;
    job.seed = random ? QRandomGenerator::global()->bounded(quint64{1} << 32) : shown.seed + i;
    QString note = tr("seed %1").arg(job.seed);
    if (count > 1) {
      note += random ? tr(" · %1 of %2 (a random seed each)").arg(i + 1).arg(count)
                     : tr(" · %1 of %2 (seeds %3, %4, …)")
                           .arg(i + 1)
                           .arg(count)
                           .arg(shown.seed)
                           .arg(shown.seed + 1);
    }
    queue_->add(job, note);
  }
  sideTabs_->setCurrentWidget(queuePanel_);  // where the jobs just added are seen
  if (shown.seedMode == SeedMode::kIncrement) video_->setSeed(shown.seed + count);
  if (!queue_->saveProblem().isEmpty()) showMessage(queue_->saveProblem());
  statusBar()->showMessage(state_ == State::kIdle
                               ? tr("%n job(s) queued", "", count)
                               : tr("%n job(s) queued: they run after this one", "", count),
                           4000);
  runQueue();  // starts at once when nothing runs; else after the running video
}

void MainWindow::runQueue() {
  setQueueRunning(true);
  startNextJob();
}

void MainWindow::stopQueue() {
  setQueueRunning(false);
  if (!currentJob_.isEmpty()) cancel();
  emit queueStopped();
}

void MainWindow::setQueueRunning(bool running) {
  queueRunning_ = running;
  queuePanel_->setRunning(running);
}

void MainWindow::startNextJob() {
  // Not while a video runs or its history item is being written, nor when quitting.
  if (!queueRunning_ || state_ != State::kIdle || closeAfterRun_ || pending_) return;
  const QueuedJob* next = queue_->nextPending();
  if (next == nullptr) {
    setQueueRunning(false);
    emit queueStopped();
    return;
  }
  const QString id = next->id;
  const GenerationSettings s = next->settings;
  const QString output = newOutputPath();
  if (output.isEmpty()) {  // said in the banner; every job would fail the same way
    setQueueRunning(false);
    emit queueStopped();
    return;
  }
  currentJob_ = id;  // a failure's banner stays: the next job does not hide it
  queue_->setStatus(id, QueuedJob::Status::kRunning, tr("starting…"));
  std::optional<models::GenerationPlan> plan;
  int steps = s.steps;
  QString key;
  const GenerationJob job = jobFor(s, output, plan, steps, key);
  launch(job, s, plan ? &*plan : nullptr, steps, key);
}

GenerationJob MainWindow::jobFor(const GenerationSettings& s, const QString& output,
                                 std::optional<models::GenerationPlan>& plan, int& steps,
                                 QString& key) {
  GenerationJob job;
  job.request = s.toRequest(output);
  const pipeline::ModelHandle& shown = modelPanel_->model();
  if (!modelPanel_->scanning() && shown && modelPanel_->paths() == s.model) {
    // The model the window has open: its stages and measured times give the whole job's ETA.
    job.model = shown;
    job.session = sessionFor(*shown);
    try {
      const pipeline::ResolvedRequest resolved = job.session->validate(*shown, job.request);
      plan = job.session->plan(*shown, resolved);
      steps = resolved.steps;
      key = timingKeyOf(*shown, job.session->target(job.request.preset), resolved);
    } catch (const std::exception&) {
      // The run says what is wrong, as the job's failure.
    }
  } else {
    // Another model folder: the engine thread opens it (the demo in its own session).
    job.session = session_;
    job.demoSession = demoSession();
  }
  return job;
}

void MainWindow::decodeDraft(const GenerationSettings& settings, const QString& video,
                             const QString& draftId) {
  if (state_ != State::kIdle) {
    showMessage(tr("A video is being made: decode the draft with the full VAE when it is done."));
    return;
  }
  const QString latents = settings.keptLatents.isEmpty()
                              ? QString()
                              : QFileInfo(video).dir().filePath(settings.keptLatents);
  if (latents.isEmpty() || !QFileInfo::exists(latents)) {
    showMessage(tr("The draft's latents (%1) are not beside it any more: the full video needs a "
                   "new run (\"Use these settings\", then Generate without the draft).")
                    .arg(QDir::toNativeSeparators(latents.isEmpty() ? video : latents)));
    return;
  }
  clearMessage();
  GenerationSettings s = settings;
  s.draft = false;
  s.latents = latents;
  const QString output = newOutputPath();
  if (output.isEmpty()) return;
  std::optional<models::GenerationPlan> plan;
  int steps = s.steps;
  QString key;
  const GenerationJob job = jobFor(s, output, plan, steps, key);
  currentJob_.clear();
  launch(job, s, plan ? &*plan : nullptr, 0, QString());
  runDraftOf_ = draftId;
}

void MainWindow::updateQueueButton() {
  const QString reason = queueBlockedReason();
  queueButton_->setEnabled(reason.isEmpty());
  queueButton_->setToolTip(
      reason.isEmpty() ? tr("Add these settings to the queue (×N: that many seeds); it runs one "
                            "job after another, also while a video is being made")
                       : reason);
}

void MainWindow::cancel() {
  if (state_ != State::kRunning) return;
  setState(State::kCancelling);
  setProgressText(tr("Cancelling…"), tr("cancelling"));
  worker_->cancel();  // thread-safe: the engine stops within one layer
}

void MainWindow::setState(State state) {
  state_ = state;
  const bool idle = state == State::kIdle;
  // The settings stay editable while a video is made: the run has its own copy, and the next
  // jobs are prepared and queued meanwhile.
  cancel_->setEnabled(state == State::kRunning);
  progress_->setVisible(!idle);
  if (idle) {
    setWindowTitle(tr("Ferry"));
    progress_->setRange(0, 1);
    // The animated preview is the run's: the video itself plays now.
    animationTimer_->stop();
    animation_->hide();
  } else {
    animationFrames_.clear();
  }
  updateGenerateButton();
  const bool haveVideo = !lastVideo_.isEmpty() && QFileInfo::exists(lastVideo_);
  openFile_->setEnabled(haveVideo);
  emit stateChanged(state);
}

void MainWindow::setProgressText(const QString& text, const QString& title) {
  status_->setText(text);
  setWindowTitle(title.isEmpty() ? tr("Ferry") : tr("%1 — Ferry").arg(title));
}

void MainWindow::onStarted(const QString& logPath) {
  lastLog_ = logPath;
  progress_->setRange(0, 0);  // busy until the first step says how many
}

QString MainWindow::timingKey() const {
  const pipeline::ModelHandle& model = modelPanel_->model();
  const auto& resolved = presetPanel_->resolved();
  const auto target = presetPanel_->target();
  if (!model || !resolved || !target) return {};
  return timingKeyOf(*model, *target, *resolved);
}

void MainWindow::startStageProgress(const models::GenerationPlan* plan, int steps,
                                    const QString& timingKey) {
  QStringList stages;
  QVector<bool> streams;
  if (plan != nullptr) {
    for (const models::StagePlan& stage : plan->stages) {
      stages << QString::fromStdString(stage.stage);
      streams << stage.streams_blocks();
    }
  }
  runTimingKey_ = timingKey;
  StageTimes measured;
  if (!runTimingKey_.isEmpty()) {
    const QVariantMap stored = store_->value(runTimingKey_).toMap();
    for (auto it = stored.begin(); it != stored.end(); ++it) measured[it.key()] = it->toDouble();
  }
  stageProgress_->start(JobEstimate(stages, streams, steps, measured));
}

QString MainWindow::etaSuffix() const {
  const double left = stageProgress_->remaining();
  return left < 0 ? QString() : tr(" · ETA %1").arg(durationText(left));
}

void MainWindow::onStage(int stage, const QString& name) {
  stageProgress_->enterStage(stage);
  if (state_ == State::kCancelling) return;
  const QString text = name.left(1).toUpper() + name.mid(1) + QStringLiteral("…");
  setProgressText(text + etaSuffix(), name);
  if (!currentJob_.isEmpty()) queue_->setDetail(currentJob_, text + etaSuffix());
  if (name != QLatin1String("denoising")) progress_->setRange(0, 0);
}

void MainWindow::onStep(const StepInfo& engineInfo) {
  stageProgress_->step(engineInfo);
  // The status bar's ETA is the whole job's: the decode and the write after the last step too.
  StepInfo info = engineInfo;
  if (const double left = stageProgress_->remaining(); left >= 0) info.etaSeconds = left;
  const double seconds = stageProgress_->elapsed();  // the charts' time axis
  ramChart_->addSample(info.step, info.ramPeakBytes, seconds);
  if (info.vramBytes != 0 || vramChart_->budget() != 0) {
    vramChart_->addSample(info.step, info.vramPeakBytes, seconds);
  }
  stepTime_->setText(tr("Step time: %1 (mean %2/step) · read %3 · waiting for weights %4")
                         .arg(durationText(info.stepSeconds), durationText(info.secondsPerStep),
                              MemoryChart::formatBytes(info.bytesRead),
                              durationText(info.ioWaitSeconds)));
  progress_->setRange(0, info.steps);
  progress_->setValue(info.step);
  if (state_ == State::kCancelling) return;
  const QString text = stepProgressText(info);
  setProgressText(text, text);
  if (!currentJob_.isEmpty()) queue_->setDetail(currentJob_, text);
}

void MainWindow::onPreview(const QImage& image) {
  lastPreview_ = image;
  player_->showPreview(image, previewCaption_);
}

void MainWindow::onPreviewFrames(const QVector<QImage>& frames) {
  if (state_ == State::kIdle) return;  // a late one from a run that has ended
  animationFrames_ = frames;
  animationFrame_ = 0;
  animation_->setVisible(!frames.isEmpty());
  showAnimationFrame();
  if (!animationTimer_->isActive()) animationTimer_->start();
}

void MainWindow::showAnimationFrame() {
  if (animationFrames_.isEmpty()) return;
  animationFrame_ %= static_cast<int>(animationFrames_.size());
  animation_->setPixmap(QPixmap::fromImage(animationFrames_[animationFrame_++].scaledToHeight(
      animation_->height(), Qt::SmoothTransformation)));
}

bool MainWindow::animatedPreviewShown() const {
  return animation_->isVisibleTo(this) && animationTimer_->isActive();
}

void MainWindow::onFinished(const GenerationOutcome& outcome) {
  lastVideo_ = outcome.video;
  pending_ = outcome;
  if (runSettings_.seedMode == SeedMode::kIncrement && currentJob_.isEmpty()) {
    video_->setSeed(runSettings_.seed + 1);
  }
  stageProgress_->finish();
  if (!currentJob_.isEmpty()) {
    // Its history item is written (once its frames are read) before the next job starts.
    queue_->setStatus(
        currentJob_, QueuedJob::Status::kDone,
        tr("in %1: %2")
            .arg(durationText(stageProgress_->elapsed()), QFileInfo(outcome.video).fileName()));
    jobAwaitingHistory_ = std::exchange(currentJob_, QString());
  }
  if (!runTimingKey_.isEmpty()) {
    QVariantMap times;
    const StageTimes measured = measuredTimes(outcome.stageSeconds, outcome.steps);
    for (auto it = measured.begin(); it != measured.end(); ++it) times[it.key()] = it.value();
    store_->setValue(runTimingKey_, times);
  }
  setState(State::kIdle);
  setProgressText(
      tr("Done in %1: %2 (%3×%4, %5 frames, seed %6)")
          .arg(durationText(stageProgress_->elapsed()), QDir::toNativeSeparators(outcome.video))
          .arg(outcome.width)
          .arg(outcome.height)
          .arg(outcome.frames)
          .arg(outcome.seed),
      QString());
  player_->showPreview(lastPreview_, tr("loading the video…"));
  QMetaObject::invokeMethod(
      worker_,
      [worker = worker_, video = outcome.video] { worker->loadFrames(video, kPlayerMaxWidth); },
      Qt::QueuedConnection);
  QApplication::alert(this);
  emit generationEnded();
  if (closeAfterRun_) close();
}

void MainWindow::onFailed(const QString& message, int code) {
  stageProgress_->stop();
  setState(State::kIdle);
  const QString text = static_cast<ErrorCode>(code) == ErrorCode::kDoesNotFit
                           ? tr("This won't fit in memory: %1").arg(message)
                           : message;
  // The message says what to do; the log has what a bug report needs.
  showMessage(lastLog_.isEmpty()
                  ? text
                  : tr("%1 (details: %2)").arg(text, QDir::toNativeSeparators(lastLog_)));
  setProgressText(tr("Failed: %1").arg(text), QString());
  player_->clear(tr("No video: %1").arg(text));
  if (!currentJob_.isEmpty()) endJob(static_cast<int>(QueuedJob::Status::kFailed), text);
  emit generationEnded();
  if (closeAfterRun_) {
    close();
    return;
  }
  startNextJob();  // a failed job does not stop the queue
}

void MainWindow::endJob(int status, const QString& detail) {
  const QString id = std::exchange(currentJob_, QString());
  queue_->setStatus(id, static_cast<QueuedJob::Status>(status), detail);
  emit jobEnded(id);
}

void MainWindow::onCancelled() {
  stageProgress_->stop();
  setState(State::kIdle);
  setProgressText(tr("Cancelled. Nothing was written."), QString());
  player_->clear(tr("Cancelled."));
  vramChart_->update();
  if (!currentJob_.isEmpty()) {
    // Quitting mid-job keeps the job for the next session; a cancel goes on to the next one.
    endJob(static_cast<int>(closeAfterRun_ ? QueuedJob::Status::kPending
                                           : QueuedJob::Status::kCancelled),
           QString());
  }
  emit generationEnded();
  if (closeAfterRun_) {
    close();
    return;
  }
  startNextJob();
}

void MainWindow::onFramesLoaded(const QString& video, const QVector<QImage>& frames, double fps,
                                const SoundPtr& sound) {
  // The video the player waits for (not another one clicked meanwhile, nor a finished one while
  // the next run shows its previews).
  if (video == lastVideo_ && state_ == State::kIdle) {
    player_->setFrames(frames, fps, sound);
    player_->play();
  }
  if (pending_ && pending_->video == video) {
    addToHistory(frames.isEmpty() ? lastPreview_ : frames.front());
  }
}

void MainWindow::onFramesFailed(const QString& video, const QString& message) {
  if (video == lastVideo_ && state_ == State::kIdle) {
    player_->clear(tr("The video was written but cannot be shown here: %1").arg(message));
  }
  if (pending_ && pending_->video == video) addToHistory(lastPreview_);
}

void MainWindow::addToHistory(const QImage& thumbnail) {
  const GenerationOutcome outcome = *pending_;
  pending_.reset();
  GenerationSettings s = runSettings_;
  // The engine's resolved values, so that "default" settings restore as what was used.
  if (!outcome.settingsJson.isEmpty()) {
    const QJsonObject used = QJsonDocument::fromJson(outcome.settingsJson.toUtf8()).object();
    GenerationSettings resolved = GenerationSettings::fromJson(used, defaultNegative_);
    resolved.model = s.model;
    resolved.seedMode = s.seedMode;
    resolved.image = s.image;
    resolved.endImage = s.endImage;
    resolved.noise = s.noise;
    resolved.saveNoise = s.saveNoise;
    resolved.saveLatents = s.saveLatents;
    resolved.saveTextStates = s.saveTextStates;
    // The generator names the LoRAs that ran (the enabled ones, in order) with their size and
    // fingerprint; the history keeps the whole list, disabled ones and paths included.
    const QList<LoraSetting> ran = resolved.loras;
    resolved.loras = s.loras;
    qsizetype k = 0;
    for (LoraSetting& l : resolved.loras) {
      if (!l.enabled || l.path.isEmpty() || k >= ran.size()) continue;
      if (ran[k].name == l.name) {
        l.bytes = ran[k].bytes;
        l.fingerprint = ran[k].fingerprint;
      }
      ++k;
    }
    s = resolved;
  }
  QString summary = tr("%1×%2 · %3 frames · %4 steps · seed %5")
                        .arg(outcome.width)
                        .arg(outcome.height)
                        .arg(outcome.frames)
                        .arg(outcome.steps)
                        .arg(outcome.seed);
  if (s.draft) summary += tr(" · draft (TAEHV)");
  if (!runDraftOf_.isEmpty()) summary += tr(" · full VAE decode of a draft");
  if (history_->add(s, outcome.video, summary, thumbnail, std::exchange(runDraftOf_, QString()))
          .id.isEmpty()) {
    statusBar()->showMessage(tr("The history could not be written in %1")
                                 .arg(QDir::toNativeSeparators(history_->folder())),
                             6000);
  }
  historyPanel_->reload();
  if (!jobAwaitingHistory_.isEmpty()) emit jobEnded(std::exchange(jobAwaitingHistory_, QString()));
  startNextJob();
}

void MainWindow::restoreRun(const GenerationSettings& settings, const QString& video) {
  undo_ = this->settings();
  GenerationSettings run = settings;
  run.seedMode = SeedMode::kFixed;  // a restored run is made again, not a new one rolled
  applySettings(run, video);
  undoAction_->setEnabled(true);
  statusBar()->showMessage(tr("The settings of %1 are restored, its seed fixed (Run → Undo "
                              "restore brings back the previous ones).")
                               .arg(QFileInfo(video).fileName()),
                           8000);
}

void MainWindow::undoRestore() {
  if (!undo_ || state_ != State::kIdle) return;
  const GenerationSettings previous = *std::exchange(undo_, std::nullopt);
  applySettings(previous);
  undoAction_->setEnabled(false);
}

bool MainWindow::openVideo(const QString& path) {
  QString why;
  const auto s = GenerationSettings::fromVideo(path, &why, defaultNegative_);
  if (!s) {
    showMessage(why);
    return false;
  }
  restoreRun(*s, path);
  showVideo(path);
  return true;
}

void MainWindow::showVideo(const QString& path) {
  if (!QFileInfo::exists(path)) {
    showMessage(tr("%1 is no longer there.").arg(QDir::toNativeSeparators(path)));
    return;
  }
  lastVideo_ = path;
  openFile_->setEnabled(true);
  player_->clear(tr("Loading %1…").arg(QFileInfo(path).fileName()));
  QMetaObject::invokeMethod(
      worker_, [worker = worker_, path] { worker->loadFrames(path, kPlayerMaxWidth); },
      Qt::QueuedConnection);
}

// ---- small actions ----

void MainWindow::useDemoModel() {
  if (state_ != State::kIdle) return;
  try {
    const QString folder = QDir(dataFolder_).filePath(QStringLiteral("demo-model"));
    // Wan's demo, the app's as it always was (the registry lists H3 first, which has a demo too:
    // ferry-cli demo --model h3).
    bool written = false;
    std::vector<const models::ModelFamily*> families = models::model_families();
    std::stable_partition(families.begin(), families.end(),
                          [](const models::ModelFamily* f) { return f->name() == "wan"; });
    for (const models::ModelFamily* family : families) {
      if (family->write_demo_model(io::detail::path_from_utf8(folder.toStdString()))) {
        written = true;
        break;
      }
    }
    if (!written) throw Error(ErrorCode::kUnsupported, "no model family of this build has a demo");
    modelPanel_->setFolder(folder);
    if (prompt_->toPlainText().trimmed().isEmpty()) {
      prompt_->setPlainText(tr("a red ferry crossing a calm fjord at sunrise, cinematic"));
    }
    statusBar()->showMessage(tr("The demo model has random weights: its videos are noise-like "
                                "patterns, not pictures of the prompt."),
                             8000);
  } catch (const std::exception& e) {
    showMessage(tr("The demo model could not be written: %1").arg(QString::fromUtf8(e.what())));
  }
}

QStringList MainWindow::libraryRoots() const {
  return gui::libraryRoots(QDir(dataFolder_).filePath(QStringLiteral("models")),
                           addedLibraryFolders(*store_));
}

LibraryPanel* MainWindow::libraryPanel() {
#ifdef FERRY_HAVE_NET
  if (library_ == nullptr) {
    // The built-in catalogue and the user's (<data>/catalogues/*.json); a user file that does not
    // parse is said, the others kept.
    std::vector<std::string> problems;
    library::Catalogue catalogue = library::load_catalogue(
        io::detail::path_from_utf8(
            QDir(dataFolder_).filePath(QStringLiteral("catalogues")).toStdString()),
        &problems);
    for (const std::string& problem : problems) showMessage(QString::fromStdString(problem));
    net::HubAccess hub = net::HubAccess::from_environment();
    if (!options_.hubEndpoint.isEmpty()) {
      hub.endpoint = QUrl(options_.hubEndpoint);
      hub.use_system_proxy = false;
    }
    // Its own window beside the main one: the sets and the catalogue need room the settings
    // column does not have at 1280×720, and a download goes on while the user works.
    libraryWindow_ = new QWidget(this, Qt::Window);
    libraryWindow_->setWindowTitle(tr("Model library — Ferry"));
    const QString models = QDir(dataFolder_).filePath(QStringLiteral("models"));
    library_ = new LibraryPanel(libraryRoots(), models, std::move(catalogue), std::move(hub));
    auto* layout = new QVBoxLayout(libraryWindow_);
    layout->addWidget(library_);
    auto* close = new QPushButton(tr("Close"));
    auto* row = new QHBoxLayout;
    row->addStretch();
    row->addWidget(close);
    layout->addLayout(row);
    connect(close, &QPushButton::clicked, libraryWindow_, &QWidget::hide);
    connect(new QShortcut(QKeySequence::Cancel, libraryWindow_), &QShortcut::activated,
            libraryWindow_, &QWidget::hide);
    connect(library_, &LibraryPanel::setChosen, this, &MainWindow::useLibrarySet);
    connect(library_, &LibraryPanel::folderAdded, this,
            [this](const QString& folder) { addLibraryFolder(*store_, folder); });
    libraryWindow_->resize(820, 600);
  }
#endif
  return library_;
}

void MainWindow::showLibrary() {
  if (libraryPanel() == nullptr) return;
  libraryWindow_->show();
  libraryWindow_->raise();
  libraryWindow_->activateWindow();
}

void MainWindow::useLibrarySet(const QStringList& files, const QString& name) {
  if (files.isEmpty()) return;
  modelPanel_->setPaths(files, name);
  if (libraryWindow_ != nullptr) libraryWindow_->hide();
  statusBar()->showMessage(tr("The model is now %1, from the library.").arg(name), 8000);
}

namespace {

// The distilled recipe's shift: the model's own (RequestRules::sampler_defaults: Wan's 5, H3's
// video shift 6), or Wan's when no model is found yet.
double distilledShift(const pipeline::ModelHandle& model) {
  if (model) {
    for (const models::RequestRules::SamplerDefaults& d : model->rules().sampler_defaults) {
      if (d.sampler == "distill4") return d.shift;
    }
  }
  return 5;
}

}  // namespace

void MainWindow::useDistilledSampler(int steps) {
  if (state_ != State::kIdle || steps <= 0) return;
  GenerationSettings s = settings();
  s.sampler = QStringLiteral("distill4");
  s.steps = steps;
  s.guideScale = 1;
  s.lowNoiseGuideScale = 1;  // both experts' (kept only for two-expert models)
  s.shift = distilledShift(modelPanel_->model());
  video_->apply(s);
  updatePlanInputs();
  statusBar()->showMessage(
      tr("Sampler distill4: %1 steps, guidance 1 (one pass per step), shift %2")
          .arg(steps)
          .arg(s.shift),
      6000);
}

void MainWindow::showMachineCheck() {
  const MachineReport report = checkMachine(*session_, outputFolder());
  store_->setValue(QStringLiteral("checkedMachine"), true);
  QMessageBox box(this);
  box.setWindowTitle(tr("Ferry: this machine"));
  box.setIcon(report.verdict == MachineReport::Verdict::kGood ? QMessageBox::Information
                                                              : QMessageBox::Warning);
  box.setText(report.verdictText);
  box.setInformativeText(report.details());
  QPushButton* use = nullptr;
  if (presetPanel_->presetName() != report.suggestedPreset) {
    use =
        box.addButton(tr("Use the %1 preset").arg(report.suggestedPreset), QMessageBox::AcceptRole);
  }
  box.addButton(QMessageBox::Close);
  box.exec();
  if (use != nullptr && box.clickedButton() == use) {
    presetPanel_->setPresetName(report.suggestedPreset);
  }
}

void MainWindow::chooseSoundtrackFile() {
  const QFileInfo clip(lastVideo_);
  const QString suggested =
      clip.absoluteDir().filePath(clip.completeBaseName() + QStringLiteral(".wav"));
  QString chosen = QFileDialog::getSaveFileName(this, tr("Save the soundtrack"), suggested,
                                                tr("WAV sound (*.wav)"));
  if (chosen.isEmpty()) return;
  if (!chosen.endsWith(QLatin1String(".wav"), Qt::CaseInsensitive))
    chosen += QStringLiteral(".wav");
  saveSoundtrack(QDir::fromNativeSeparators(chosen));
}

bool MainWindow::saveSoundtrack(const QString& path) {
  const std::shared_ptr<const media::AudioTrack>& sound = player_->sound();
  if (!sound || sound->empty()) {
    showMessage(tr("This clip has no sound to save."));
    return false;
  }
  try {
    media::write_wav(io::detail::path_from_utf8(path.toStdString()), *sound);
  } catch (const Error& e) {
    showMessage(tr("The soundtrack was not saved: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
  statusBar()->showMessage(tr("Soundtrack saved: %1").arg(QDir::toNativeSeparators(path)), 5000);
  return true;
}

void MainWindow::openFile() {
  if (!lastVideo_.isEmpty()) QDesktopServices::openUrl(QUrl::fromLocalFile(lastVideo_));
}

void MainWindow::openFolder() {
  const QString folder =
      lastVideo_.isEmpty() ? outputFolder() : QFileInfo(lastVideo_).absolutePath();
  QDir().mkpath(folder);
  QDesktopServices::openUrl(QUrl::fromLocalFile(folder));
}

void MainWindow::showMessage(const QString& message) {
  lastMessage_ = message;
  message_->setText(QStringLiteral("⚠ ") + message);
  message_->show();  // beside the Generate button, outside the scroll: in view, and said once
}

void MainWindow::clearMessage() {
  lastMessage_.clear();
  message_->hide();
}

QString MainWindow::statusText() const {
  return status_->text();
}

// ---- window events ----

void MainWindow::closeEvent(QCloseEvent* event) {
  if (state_ != State::kIdle) {
    if (options_.askBeforeClosing &&
        QMessageBox::question(this, tr("Quit Ferry?"),
                              tr("A video is being made. Cancel it and quit? Nothing "
                                 "half-written is left behind.")) != QMessageBox::Yes) {
      event->ignore();
      return;
    }
    closeAfterRun_ = true;
    cancel();
    event->ignore();  // closes once the engine has stopped (onCancelled)
    return;
  }
  saveState();
  event->accept();
}

namespace {

// The LoRA files of a drop: every one of its files is a .safetensors file, else none.
QStringList droppedLoras(const QList<QUrl>& urls) {
  QStringList paths;
  for (const QUrl& url : urls) {
    if (!url.isLocalFile() || !isLoraFile(url.toLocalFile())) return {};
    paths << url.toLocalFile();
  }
  return paths;
}

}  // namespace

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  const auto urls = event->mimeData()->urls();
  if (state_ != State::kIdle) return;
  if ((urls.size() == 1 && urls.front().isLocalFile()) || !droppedLoras(urls).isEmpty()) {
    event->acceptProposedAction();
  }
}

void MainWindow::dropEvent(QDropEvent* event) {
  const auto urls = event->mimeData()->urls();
  // A video restores its settings; safetensors files are LoRAs (a model is a folder).
  if (const QStringList loras = droppedLoras(urls); !loras.isEmpty()) {
    loraList_->addLoras(loras);
    event->acceptProposedAction();
    return;
  }
  if (urls.size() != 1 || !urls.front().isLocalFile()) return;
  const QString path = urls.front().toLocalFile();
  if (path.endsWith(QLatin1String(".mp4"), Qt::CaseInsensitive)) {
    openVideo(path);
  } else if (QFileInfo(path).isDir()) {
    modelPanel_->setFolder(path);
  } else {
    startImage_->setPath(path);
  }
  event->acceptProposedAction();
}

void MainWindow::showEvent(QShowEvent* event) {
  if (std::exchange(placeOnShow_, false)) {
    QScreen* screen = options_.screen ? options_.screen : this->screen();
    const FirstRunPlacement place = firstRunPlacement(screen->availableGeometry());
    setGeometry(place.geometry);
    if (place.maximized) setWindowState(windowState() | Qt::WindowMaximized);
  }
  QMainWindow::showEvent(event);
}

void MainWindow::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ThemeChange) {
    vramChart_->update();
    ramChart_->update();
  }
  QMainWindow::changeEvent(event);
}

}  // namespace ferry::gui
