// Constructors of the concrete sources, called by OpenSource.
#pragma once

#include "ssdfeed/dataset.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

Result<std::unique_ptr<Source>> OpenFolderSource(const std::string& uri, const std::string& dir,
                                                 const SourceOptions& opts);
Result<std::unique_ptr<Source>> OpenTFRecordSource(const std::string& uri,
                                                   const std::vector<std::string>& files,
                                                   const SourceOptions& opts);
Result<std::unique_ptr<Source>> OpenTarSource(const std::string& uri,
                                              const std::vector<std::string>& files,
                                              const SourceOptions& opts);
// files:ROOT?FIELD=PATTERN&... (spec: all after "files:").
Result<std::unique_ptr<Source>> OpenFilesSource(const std::string& uri, const std::string& spec,
                                                const SourceOptions& opts);
// coco:IMAGES_DIR?annotations=FILE.json[&crowd=1] (spec: all after "coco:").
Result<std::unique_ptr<Source>> OpenCocoSource(const std::string& uri, const std::string& spec,
                                               const SourceOptions& opts);

// s3://BUCKET/PATTERN in the given layout ("tfrecord", "tar", "folder"; ""
// infers it from the pattern's extension). location is the s3:// part.
Result<std::unique_ptr<Source>> OpenS3Source(const std::string& uri, const std::string& location,
                                             const std::string& layout, const SourceOptions& opts);

// Writes a dataset file (0644, replacing what is there): make-dataset's files.
Status WriteDatasetFile(Env* env, const std::string& path, const std::string& data);

// Writes a tar of these members (name, bytes), in order, reproducibly.
Status WriteTarMembers(Env* env, const std::string& path,
                       const std::vector<std::pair<std::string, std::string>>& members);

// make-dataset's scene formats (voc, coco, wds-seg); o.dir exists.
Status MakeSceneDataset(const MakeDatasetOptions& o, Env* env, MakeDatasetReport* report);

// Appends the expansions of the brace ranges / lists in pattern to out.
Status ExpandBraces(const std::string& pattern, std::vector<std::string>* out);

}  // namespace ssdfeed
