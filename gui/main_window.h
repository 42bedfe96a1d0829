// Ferry's main window: the model, the prompt, the start and end frames, the video settings, the
// LoRAs and the Generate button on the left; the preview / player above the memory plan and the
// live VRAM and RAM charts in the middle; the history on the right. On its first start it fills
// the screen it opens on (a laptop's 1280×720 included: the primary controls need no scrolling),
// and it opens as it was left after that.
// "Queue" beside Generate adds the settings shown (×N seeds) to the job queue (job_queue.h), which
// runs one job after another, each landing in the history; the settings stay editable while a
// video is made, so the next jobs can be prepared and queued meanwhile.
// The engine runs on a worker QThread (GenerationWorker); everything here reacts to its queued
// signals, so the window never waits for the engine.
#pragma once

#include <QImage>
#include <QMainWindow>
#include <QMessageBox>
#include <QPointer>
#include <QThread>
#include <optional>

#include "core/pipeline/session.h"
#include "gui/generation_settings.h"
#include "gui/generation_worker.h"

class QAction;
class QCheckBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QScreen;
class QSettings;
class QSpinBox;
class QTabWidget;
class QTimer;
class QSplitter;

namespace ferry::gui {

class AdvancedBox;
struct ClipLookup;
class FramePlayer;
class HistoryPanel;
class HistoryStore;
class JobQueue;
class QueuePanel;
class LatestQuery;
class LibraryPanel;
class LoraList;
class MemoryChart;
class ModelPanel;
class PresetPanel;
class StageProgress;
class StartImageBox;
class VideoSettingsBox;

struct MainWindowOptions {
  QString dataFolder;                           // empty: io::user_data_dir()
  std::optional<offload::MachineInfo> machine;  // empty: measured
  bool firstRunCheck = true;                    // show the machine check on the first start
  bool askBeforeClosing = true;
  QScreen* screen = nullptr;  // the screen to open on the first time; null: the primary one
  // Tests: the hub the model library downloads from (no proxy); empty: HF_ENDPOINT's, else the hub.
  QString hubEndpoint;
};

// Where the window opens the first time on a screen whose free area is `available`: maximised on
// laptop and desktop screens up to 2200 px wide, a centred 1920×1200 or smaller beyond (a
// settings column stretched across a 4K screen helps nobody). `maximized` says which.
struct FirstRunPlacement {
  QRect geometry;
  bool maximized = false;
};
FirstRunPlacement firstRunPlacement(const QRect& available);

// The status bar's line for a denoising step: "step 3/20 · 1.2 s/step · ETA 20 s", led by the
// expert that ran it for two-expert models ("High-noise expert · step 3/20 · …").
QString stepProgressText(const StepInfo& info);

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(MainWindowOptions options = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  enum class State { kIdle, kRunning, kCancelling };
  State state() const { return state_; }

  GenerationSettings settings() const;
  // Shows `settings`. Settings read back from a clip (`clip`: the video, or empty) that name their
  // model files are looked up off the GUI thread: the model by file name in the clip's folder, if
  // any, then in the one chosen now; the noise file it was made from beside the clip or where the
  // last one was loaded. restoreNotice() then says what was found and what was not.
  void applySettings(const GenerationSettings& settings, const QString& clip = QString());
  // Puts back the settings of a past run (a history item, a Ferry MP4) so that Generate makes it
  // again: its seed fixed (never "random each time"), its model files, LoRAs, preset and sampler.
  // What the window showed before can be had back with undoRestore().
  void restoreRun(const GenerationSettings& settings, const QString& video);
  bool canUndoRestore() const { return undo_.has_value(); }
  void undoRestore();
  // Restores the settings a Ferry MP4 carries and shows it; false with a message when it cannot.
  bool openVideo(const QString& path);
  // Plays a video in the window's player (decoded on the engine thread), settings untouched.
  void showVideo(const QString& path);
  // Writes the soundtrack of the clip in the player (as it plays: decoded from the clip's AAC
  // track) to `path` as a 16-bit WAV, through a temporary name. False with a message when the
  // clip is silent or the file cannot be written. The player's "Save soundtrack…" asks where.
  bool saveSoundtrack(const QString& path);

  // Nothing is being looked up: the model found and the plan made for what the window shows.
  bool settled() const;
  // The message the window last showed about a problem (empty after a success), for tests.
  QString lastMessage() const { return lastMessage_; }
  // What the last restore of a clip found out (its model's folder, its noise file); empty when
  // there was nothing to say.
  QString restoreNotice() const { return restoreNotice_; }
  // <data folder>/logs: the runs' logs and crash reports.
  QString logsFolder() const;
  QString lastVideo() const { return lastVideo_; }
  QString statusText() const;
  bool generateEnabled() const;
  QString generateBlockedReason() const;
  // Why "Queue" would add nothing now (as Generate's, but a running video does not stop it).
  QString queueBlockedReason() const;
  bool queueEnabled() const;
  // Whether the window runs the queue's pending jobs, one after another.
  bool queueRunning() const { return queueRunning_; }
  // The queued job running now; empty for none (or for a run Generate started).
  QString currentJob() const { return currentJob_; }

  // The caption under each step's preview: "preview", or, when the model set has no TAEHV
  // decoder (its previews are a colour sketch of the latent), how to get real pictures.
  QString previewCaption() const { return previewCaption_; }
  // The small animated preview beside the player's buttons: every latent frame of the last step's
  // estimate, looping while the video is made (with a TAEHV decoder; hidden otherwise).
  int animatedPreviewFrames() const { return static_cast<int>(animationFrames_.size()); }
  bool animatedPreviewShown() const;

  // The parts the tests drive.
  QCheckBox* draftBox() const { return draft_; }  // "Decode draft with TAEHV"
  PresetPanel* presetPanel() const { return presetPanel_; }
  ModelPanel* modelPanel() const { return modelPanel_; }
  // The model library (made on first use, in its own window): the sets on disk, the catalogue.
  // Null in a build without the downloader (FERRY_HAVE_NET).
  LibraryPanel* libraryPanel();
  QWidget* libraryWindow() const { return libraryWindow_; }
  // The folders the library scans and a restored clip's model files are looked for below
  // (library_roots.h). Reads the drive.
  QStringList libraryRoots() const;
  LoraList* loraList() const { return loraList_; }
  AdvancedBox* advancedBox() const { return advanced_; }
  StartImageBox* startImage() const { return startImage_; }
  StartImageBox* endImage() const { return endImage_; }
  // The mode the filled frame boxes make, the prompt template button (shown when the model has
  // one: H3), and the weights' licence notice while it is open (null otherwise).
  QString frameModeText() const;
  QPushButton* promptTemplateButton() const { return promptTemplate_; }
  QMessageBox* licenceNoticeBox() const { return licenseNotice_; }
  FramePlayer* player() const { return player_; }
  HistoryPanel* historyPanel() const { return historyPanel_; }
  JobQueue* jobQueue() const { return queue_; }
  QueuePanel* queuePanel() const { return queuePanel_; }
  QSpinBox* batchCount() const { return batch_; }       // "×N": how many jobs "Queue" adds
  QTabWidget* sidePanels() const { return sideTabs_; }  // the history and the queue
  MemoryChart* vramChart() const { return vramChart_; }
  MemoryChart* ramChart() const { return ramChart_; }
  StageProgress* stageProgress() const { return stageProgress_; }
  GenerationWorker* worker() const { return worker_; }
  QString outputFolder() const;
  void setOutputFolder(const QString& folder);

 public slots:
  void generate();
  void cancel();
  // Adds the settings shown to the queue as ×N jobs (seeds s, s+1, …; a new random seed each in
  // "random each time" mode) and, when nothing runs, starts the queue.
  void enqueue();
  void runQueue();
  // Cancels the running queued job and starts no other; the pending jobs stay.
  void stopQueue();
  // The full VAE decode of a draft (a history item made with "Decode draft with TAEHV"): its
  // kept latents decoded without denoising, into a new video whose history item names the draft
  // (`draftId`). A message instead while a video is being made or when the latents are gone.
  void decodeDraft(const ferry::gui::GenerationSettings& settings, const QString& video,
                   const QString& draftId);
  void useDemoModel();
  void showLibrary();
  // A set chosen in the library becomes the model: its files, wherever they are.
  void useLibrarySet(const QStringList& files, const QString& name);
  // The step-distilled sampler for a distillation LoRA: distill4, `steps` steps, no CFG, shift 5.
  void useDistilledSampler(int steps);
  void showMachineCheck();

 signals:
  void stateChanged(ferry::gui::MainWindow::State state);
  void generationEnded();  // finished, failed or cancelled, after the window is idle again
  // A queued job ended (its status set, its video in the history when it made one).
  void jobEnded(const QString& id);
  void queueStopped();  // nothing left to run, or stopped

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void changeEvent(QEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  void buildUi();
  void buildMenus();
  void connectWorker();
  void restoreState();
  void saveState();
  QString openSession();  // a problem with the user's presets, or empty
  std::shared_ptr<const pipeline::Session> sessionFor(const models::ModelParts& model);
  std::shared_ptr<const pipeline::Session> demoSession();
  void onModelChanged();
  void onPlanChanged();
  void updatePlanInputs();
  void updateGenerateButton();
  void setState(State state);
  void showMessage(const QString& message);
  void noticePreviousCrash();
  void clearMessage();
  void setProgressText(const QString& text, const QString& title);

  void onStarted(const QString& logPath);
  void onStage(int stage, const QString& name);
  void onStep(const StepInfo& info);
  void onPreview(const QImage& image);
  void onPreviewFrames(const QVector<QImage>& frames);
  void showAnimationFrame();
  void onFinished(const GenerationOutcome& outcome);
  void onFailed(const QString& message, int code);
  void onCancelled();
  void onFramesLoaded(const QString& video, const QVector<QImage>& frames, double fps,
                      const SoundPtr& sound);
  void onFramesFailed(const QString& video, const QString& message);
  void addToHistory(const QImage& thumbnail);
  // The settings key of the stage times measured for a model, preset and size.
  QString timingKey() const;
  QString etaSuffix() const;  // " · ETA 1 min 05 s", or empty while nothing tells
  // The plan's stages (none when unknown) and what earlier runs under `timingKey` measured.
  void startStageProgress(const models::GenerationPlan* plan, int steps, const QString& timingKey);
  QString inputsBlockedReason() const;
  // A new file name in the output folder (created); empty with a message when it cannot be.
  QString newOutputPath();
  // Starts `job` (made from `settings`) on the engine thread.
  void launch(GenerationJob job, const GenerationSettings& settings,
              const models::GenerationPlan* plan, int steps, const QString& timingKey);
  // The job for `settings` writing to `output`: on the model the window has open when it is the
  // settings' folder (then `plan`, `steps` and `key` are filled in for the whole job's ETA), else
  // on the model the engine thread finds there.
  GenerationJob jobFor(const GenerationSettings& settings, const QString& output,
                       std::optional<models::GenerationPlan>& plan, int& steps, QString& key);
  void updateDraftBox();
  // The mode under the frame boxes, the template button, the weights' licence notice when due.
  void updateFrameMode();
  void showLicenceNoticeIfDue();
  std::optional<models::WeightsLicence> unconfirmedLicence() const;
  void insertPromptTemplate();
  // The next pending job, when the queue runs and nothing else does.
  void startNextJob();
  // The running queued job ended: its status, then the next one.
  void endJob(int status, const QString& detail);
  void setQueueRunning(bool running);
  void updateQueueButton();
  void onClipLookedUp(const GenerationSettings& settings, const ClipLookup& found);
  void openFile();
  void openFolder();
  void chooseSoundtrackFile();

  MainWindowOptions options_;
  QString dataFolder_;
  QSettings* store_ = nullptr;
  std::shared_ptr<pipeline::Session> session_;
  std::shared_ptr<pipeline::Session> demoSession_;  // the demo streams every block; made on use
  QString defaultNegative_;  // the model's default negative prompt, once a plan resolved it
  State state_ = State::kIdle;
  QString lastMessage_;
  QString restoreNotice_;
  QString lastVideo_;
  QString lastLog_;  // the running (or last) run's log
  QImage lastPreview_;
  std::optional<GenerationOutcome> pending_;  // finished, waiting for its frames for the history
  GenerationSettings runSettings_;
  bool demoRun_ = false;
  JobQueue* queue_ = nullptr;
  QueuePanel* queuePanel_ = nullptr;
  QPushButton* queueButton_ = nullptr;
  QSpinBox* batch_ = nullptr;
  QTabWidget* sideTabs_ = nullptr;
  bool queueRunning_ = false;
  QString currentJob_;  // the running queued job's id
  // A queued job that finished: its history item is written before the next one starts.
  QString jobAwaitingHistory_;
  bool closeAfterRun_ = false;

  QThread thread_;
  GenerationWorker* worker_ = nullptr;  // lives on thread_

  QPlainTextEdit* prompt_ = nullptr;
  QPlainTextEdit* negative_ = nullptr;
  QPushButton* resetNegative_ = nullptr;
  StartImageBox* startImage_ = nullptr;
  StartImageBox* endImage_ = nullptr;
  QLabel* frameMode_ = nullptr;
  QPushButton* promptTemplate_ = nullptr;
  QPointer<QMessageBox> licenseNotice_;
  ModelPanel* modelPanel_ = nullptr;
  QWidget* libraryWindow_ = nullptr;
  LibraryPanel* library_ = nullptr;
  LoraList* loraList_ = nullptr;
  PresetPanel* presetPanel_ = nullptr;
  VideoSettingsBox* video_ = nullptr;
  AdvancedBox* advanced_ = nullptr;
  LatestQuery* clipQuery_ = nullptr;  // restoring a clip: its model files and noise file
  QLabel* planLine_ = nullptr;
  QCheckBox* draft_ = nullptr;
  QLabel* animation_ = nullptr;  // the animated preview
  QTimer* animationTimer_ = nullptr;
  QVector<QImage> animationFrames_;
  int animationFrame_ = 0;
  QString previewCaption_;
  QString runDraftOf_;  // the running job is the full decode of this history item (its id)
  QPushButton* generate_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QLabel* message_ = nullptr;
  FramePlayer* player_ = nullptr;
  QPushButton* openFile_ = nullptr;
  QPushButton* openFolder_ = nullptr;
  MemoryChart* vramChart_ = nullptr;
  MemoryChart* ramChart_ = nullptr;
  QLabel* stepTime_ = nullptr;
  StageProgress* stageProgress_ = nullptr;
  QString runTimingKey_;  // timingKey() of the running job
  HistoryStore* history_ = nullptr;
  HistoryPanel* historyPanel_ = nullptr;
  QLabel* status_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QSplitter* splitter_ = nullptr;
  QSplitter* middleSplitter_ = nullptr;
  bool placeOnShow_ = false;  // no remembered geometry: placed by firstRunPlacement when shown
  // applySettings() chose a model folder: the model found there keeps the restored settings
  // instead of filling in its defaults.
  bool keepSettingsForModel_ = false;
  std::optional<GenerationSettings> undo_;  // what the last restoreRun() replaced
  QAction* undoAction_ = nullptr;
};

// Where Ferry keeps its per-user data: io::user_data_dir(), or the folder tests pass.
QString defaultDataFolder();

}  // namespace ferry::gui
