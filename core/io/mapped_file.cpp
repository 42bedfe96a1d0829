#include "core/io/mapped_file.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {

struct MappedFile::State {
  std::filesystem::path path;
  detail::MappingHandles handles;
  std::atomic<std::size_t> live_views{0};

  ~State() { detail::close_mapping(handles); }
};

MappedFile MappedFile::open(const std::filesystem::path& path) {
  auto state = std::make_shared<State>();
  state->path = path;
  state->handles = detail::open_for_mapping(path);
  return MappedFile(std::move(state));
}

MappedFile& MappedFile::operator=(MappedFile&& other) {
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}

// Views share the state, so dropping our share under live leases cannot unmap them.
MappedFile::~MappedFile() = default;

const std::filesystem::path& MappedFile::path() const {
  static const std::filesystem::path kNone;
  return state_ ? state_->path : kNone;
}

std::uint64_t MappedFile::size() const { return state_ ? state_->handles.size : 0; }

std::size_t MappedFile::live_views() const { return state_ ? state_->live_views.load() : 0; }

std::size_t MappedFile::granularity() { return detail::map_granularity(); }

void MappedFile::close() {
  if (!state_) return;
  const std::size_t views = state_->live_views.load();
  if (views != 0) {
    throw Error(ErrorCode::kBusy, "cannot close " + detail::display(state_->path) + ": " +
                                      std::to_string(views) + " view(s) of it are still in use");
  }
  state_.reset();
}

MappedView MappedFile::map(std::uint64_t offset, std::uint64_t length) const {
  if (!state_) throw Error(ErrorCode::kBadArgument, "map() on a closed file");
  const std::uint64_t file_size = state_->handles.size;
  if (offset > file_size || length > file_size - offset) {
    throw Error(ErrorCode::kBadArgument,
                "byte range " + std::to_string(offset) + "+" + std::to_string(length) +
                    " lies outside " + detail::display(state_->path) + " (" +
                    std::to_string(file_size) + " bytes)");
  }
  MappedView view;
  view.file_ = state_;
  view.offset_ = offset;
  view.size_ = length;
  state_->live_views.fetch_add(1);
  if (length == 0) return view;

  const std::uint64_t granularity = detail::map_granularity();
  const std::uint64_t start = offset - offset % granularity;
  const std::uint64_t region_size = length + (offset - start);
  if (region_size > SIZE_MAX) {
    throw Error(ErrorCode::kUnsupported, "a view of " + std::to_string(length) +
                                             " bytes does not fit this address space");
  }
  view.region_size_ = static_cast<std::size_t>(region_size);
  view.region_ = detail::map_region(state_->handles, start, view.region_size_, state_->path);
  view.data_ = static_cast<const std::byte*>(view.region_) + (offset - start);
  return view;
}

MappedView::MappedView(MappedView&& other) noexcept
    : file_(std::move(other.file_)),
      region_(std::exchange(other.region_, nullptr)),
      region_size_(std::exchange(other.region_size_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      offset_(std::exchange(other.offset_, 0)),
      size_(std::exchange(other.size_, 0)) {}

MappedView& MappedView::operator=(MappedView&& other) noexcept {
  if (this != &other) {
    release();
    file_ = std::move(other.file_);
    region_ = std::exchange(other.region_, nullptr);
    region_size_ = std::exchange(other.region_size_, 0);
    data_ = std::exchange(other.data_, nullptr);
    offset_ = std::exchange(other.offset_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedView::release() noexcept {
  if (region_ != nullptr) detail::unmap_region(region_, region_size_);
  if (file_) file_->live_views.fetch_sub(1);
  file_.reset();
  region_ = nullptr;
  region_size_ = 0;
  data_ = nullptr;
  offset_ = 0;
  size_ = 0;
}

void MappedView::prefetch() const noexcept {
  if (region_ != nullptr) detail::advise_willneed(region_, region_size_);
}

void MappedView::evict(std::uint64_t offset, std::uint64_t length) const noexcept {
  if (region_ == nullptr || offset >= size_) return;
  length = std::min(length, size_ - offset);
  // Offsets within the OS region, which starts before data_ at the granularity boundary.
  const std::uint64_t page = detail::page_size();
  const std::uint64_t lead = static_cast<std::uint64_t>(data_ - static_cast<const std::byte*>(region_));
  std::uint64_t begin = lead + offset;
  std::uint64_t end = begin + length;
  // The region's last page may be partial: a range reaching the view's end takes all of it.
  if (offset + length == size_) end = region_size_ + (page - region_size_ % page) % page;
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end <= begin) return;
  detail::advise_dontneed(static_cast<const std::byte*>(region_) + begin,
                          static_cast<std::size_t>(end - begin));
}

void MappedView::copy_to(std::uint64_t offset, std::span<std::byte> dst) const {
  if (offset > size_ || dst.size() > size_ - offset) {
    throw Error(ErrorCode::kBadArgument, "copy outside the mapped view");
  }
  if (dst.empty()) return;
  if (!detail::guarded_copy(dst.data(), data_ + offset, dst.size())) {
    throw Error(ErrorCode::kIo,
                "reading " + detail::display(file_->path) + " failed at byte " +
                    std::to_string(offset_ + offset) +
                    ": the file shrank or its drive went away while it was in use");
  }
}

}  // namespace ferry::io
