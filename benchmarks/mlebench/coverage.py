"""Which of MLE-bench's medical-imaging competitions the conformance run covers, and why not the rest.

Listed from `mlebench/competitions/` (openai/mle-bench at 783b15a): the twelve whose data are medical
images (hms-harmful-brain-activity-classification is EEG, not imaging, and is left out of the list).
"""

from __future__ import annotations

# One answers row per case, class columns; the case an image named by its id, or (RSNA-MICCAI) a folder
# of four DICOM series named by its id.
COVERED = (
    "aptos2019-blindness-detection",
    "histopathologic-cancer-detection",
    "ranzcr-clip-catheter-line-classification",
    "rsna-miccai-brain-tumor-radiogenomic-classification",
)

NOT_COVERED = {
    "siim-isic-melanoma-classification": "prepare.py reads the test split's ids from TFRecord files with tensorflow "
    "(get_ids_from_tf_records); tensorflow is not installed in the grader environment, and synthetic TFRecords "
    "need it too. Its prepared layout (train/*.dcm beside jpeg/train/*.jpg) is a CI fixture",
    "rsna-breast-cancer-detection": "the answers' id (prediction_id = <patient_id>_<laterality>) names no file: "
    "a case is several DICOM images of a patient and side; no layout maps an answer row to its images",
    "osic-pulmonary-fibrosis-progression": "the answers' id is <Patient>_<Weeks>: many rows per patient's CT series, "
    "a tabular forecast with a confidence column; no image is named by an answer id",
    "uw-madison-gi-tract-image-segmentation": "answers are run-length masks per slice and class (id, class, "
    "segmentation) in case/day/scans folders; several rows per id",
    "hubmap-kidney-segmentation": "answers are run-length masks (encoding) scored at sizes from a separate table "
    "(width_pixels/height_pixels), and the submission's target column (predicted) is not an answers column",
    "vinbigdata-chest-xray-abnormalities-detection": "detection: several box rows per image_id in the answers "
    "(class_id, x_min, ...), a PredictionString per image in the submission",
    "siim-covid19-detection": "detection at two levels (study and image ids in one table), PredictionString boxes",
    "rsna-2022-cervical-spine-fracture-detection": "DICOM series per study, and answers of several rows per study "
    "(row_id = <StudyInstanceUID>_<vertebra>)",
}

# leaderboard.csv is a Git LFS pointer in a checkout made without git-lfs; AMID reads only the metric's
# direction from it (best score first). Two rows in the direction of each covered metric.
STANDIN_BOARDS = {
    "aptos2019-blindness-detection": (0.93, 0.0),  # quadratic weighted kappa: higher is better
    "histopathologic-cancer-detection": (0.99, 0.5),  # AUC: higher is better
    "ranzcr-clip-catheter-line-classification": (0.97, 0.5),  # mean AUC: higher is better
    "rsna-miccai-brain-tumor-radiogenomic-classification": (0.62, 0.5),  # AUC: higher is better
}
