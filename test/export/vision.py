"""torchvision classifiers as their users build them (no downloaded weights),
for test/lit/models/torchvision-convnets.test."""


def classifier(name, num_classes=1000):
    import torchvision
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
