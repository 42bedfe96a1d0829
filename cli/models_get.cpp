// `ferry-cli models get NAME [--precision P] [--to DIR] [--accept-licence]` and `models clean`:
// a catalogue set downloaded with net/'s HubDownloader, with a progress line a second, Ctrl-C a
// clean cancel (the partial files stay, to resume).
#include <QCoreApplication>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/library/catalogue.h"
#include "core/library/roots.h"
#include "net/credentials.h"
#include "net/hub_downloader.h"

namespace ferry::cli {
namespace {

namespace fs = std::filesystem;
using io::detail::display;

net::HubDownloader* g_downloading = nullptr;

extern "C" void cancel_on_signal(int) {
  if (g_downloading != nullptr) g_downloading->cancel();  // an atomic store
}

fs::path target_folder(const Args& args) {
  if (const std::optional<std::string> to = args.value("to"))
    return io::detail::path_from_utf8(*to);
  return library::ferry_models_dir();
}

std::string duration_text(double seconds) {
  if (seconds < 0) return "?";
  const long s = static_cast<long>(seconds + 0.5);
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
}

// The licence of an entry that must be accepted first (MiniMax-H3): said, and the download refused
// without --accept-licence.
void check_licence(const library::CatalogueEntry& entry, const Args& args) {
  std::printf("licence: %s (%s)\n", entry.licence.id.c_str(), entry.licence.url.c_str());
  if (!entry.licence.confirm) return;
  std::printf("\n%s\n\n", entry.licence.notice.c_str());
  if (!args.flag("accept-licence")) {
    throw Error(ErrorCode::kBadArgument,
                entry.title + " is under a licence you must accept first (above, and " +
                    entry.licence.url + "): run again with --accept-licence once you accept it");
  }
}

class ProgressPrinter {
 public:
  explicit ProgressPrinter(const net::DownloadPlan& plan)
      : plan_(plan), finished_(plan.files.size()) {}
  void operator()(const net::DownloadProgress& p) {
    for (std::size_t i = 0; i < p.files.size(); ++i) {
      if (p.files[i].finished && !finished_[i]) {
        finished_[i] = true;
        std::printf("  done %s (%s, verified)\n", display(plan_.files[i].source.to).c_str(),
                    net::human_bytes(plan_.files[i].size).c_str());
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(1) || p.done == p.total) return;
    last_ = now;
    const double percent =
        p.total ? 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total) : 100;
    std::printf("  %5.1f%%  %s of %s  %s/s  %s left\n", percent, net::human_bytes(p.done).c_str(),
                net::human_bytes(p.total).c_str(),
                net::human_bytes(static_cast<std::uint64_t>(p.bytes_per_second)).c_str(),
                duration_text(p.eta_seconds).c_str());
    std::fflush(stdout);
  }

 private:
  const net::DownloadPlan& plan_;
  std::vector<bool> finished_;
  std::chrono::steady_clock::time_point last_{};
};

// Qt Network needs an application object for its event loop; the CLI makes one for the download.
QCoreApplication& qt_application() {
  static int argc = 1;
  static char name[] = "ferry-cli";
  static char* argv[] = {name, nullptr};
  static QCoreApplication app(argc, argv);
  return app;
}

}  // namespace

int run_models_get(const std::vector<std::string>& rest) {
  const Args args(rest, {"precision", "to"}, {"accept-licence"});
  if (args.positional().size() != 1) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli models get NAME [--precision P] [--to DIR] [--accept-licence] "
                "(NAME from `ferry-cli models list`)");
  }
  std::vector<std::string> problems;
  const library::Catalogue catalogue =
      library::load_catalogue(library::user_catalogue_dir(), &problems);
  for (const std::string& p : problems) std::fprintf(stderr, "catalogue skipped: %s\n", p.c_str());
  const std::string& name = args.positional()[0];
  const library::CatalogueEntry* entry = catalogue.find(name);
  if (entry == nullptr) {
    throw Error(ErrorCode::kBadArgument,
                "no model named '" + name + "' in the catalogue (see `ferry-cli models list`)");
  }
  const std::string precision = args.value_or("precision", "");
  const library::CatalogueVariant* variant = entry->variant(precision);
  if (variant == nullptr) {
    std::string known;
    for (const auto& v : entry->variants) known += (known.empty() ? "" : ", ") + v.precision;
    throw Error(ErrorCode::kBadArgument,
                entry->title + " has no precision '" + precision + "' (it has " + known + ")");
  }
  std::printf("%s (%s)\n", entry->title.c_str(), variant->precision.c_str());
  check_licence(*entry, args);

  qt_application();
  net::HubDownloader downloader(net::HubAccess::from_environment());
  const fs::path folder = target_folder(args);
  const net::DownloadPlan plan = downloader.plan(*variant, folder);
  std::printf("into %s:\n", display(folder).c_str());
  for (const net::PlannedFile& f : plan.files) {
    std::printf("  %-60s %10s%s\n", display(f.source.to).c_str(), net::human_bytes(f.size).c_str(),
                f.complete      ? "  (there: verified before use)"
                : f.present > 0 ? ("  (" + net::human_bytes(f.present) + " to resume from)").c_str()
                                : "");
  }
  std::printf("total %s, %s to fetch\n", net::human_bytes(plan.total_bytes()).c_str(),
              net::human_bytes(plan.bytes_to_fetch()).c_str());
  downloader.check_space(plan);

  ProgressPrinter printer(plan);
  g_downloading = &downloader;
  std::signal(SIGINT, cancel_on_signal);
  try {
    downloader.download(plan, std::ref(printer));
  } catch (...) {
    std::signal(SIGINT, SIG_DFL);
    g_downloading = nullptr;
    throw;
  }
  std::signal(SIGINT, SIG_DFL);
  g_downloading = nullptr;
  std::printf("%s (%s) is in %s: `ferry-cli models list` shows it\n", entry->title.c_str(),
              variant->precision.c_str(), display(folder).c_str());
  return 0;
}

// The token read from standard input (never from the command line, which shells keep in their
// history), stored in the platform's credential store.
int run_models_login(const std::vector<std::string>& rest) {
  if (!rest.empty()) {
    throw Error(ErrorCode::kBadArgument,
                "usage: ferry-cli models login < token.txt (the token on standard input)");
  }
  std::string token;
  std::getline(std::cin, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) throw Error(ErrorCode::kBadArgument, "no token on standard input");
  if (!net::store_token(token)) {
    throw Error(ErrorCode::kUnsupported,
                "this platform has no credential store Ferry uses: set HF_TOKEN, or log in with "
                "`huggingface-cli login` (its token file is read)");
  }
  std::printf("the token is stored in the credential store (%s)\n", net::kCredentialName);
  return 0;
}

int run_models_logout(const std::vector<std::string>&) {
  std::printf(net::forget_stored_token() ? "the stored token is removed\n"
                                         : "no token was stored\n");
  return 0;
}

int run_models_clean(const std::vector<std::string>& rest) {
  const Args args(rest, {"to"}, {});
  const fs::path folder = target_folder(args);
  const int removed = net::remove_partials(folder);
  std::printf("removed %d partial file(s) from %s\n", removed, display(folder).c_str());
  return 0;
}

}  // namespace ferry::cli
